#!/usr/bin/env node
// The fetch-model init container of a model in storage (docs/model-storage.md): fetches the artifact
// into the node's cache, or finds it there, before the model starts.
//   node dist/src/fetcher.js --uri=<s3://…|https://…> [--sha256=<hex>] --dest=<file in the cache>
// Logs JSON lines (the last one is the progress the operator shows). Exit codes: 0 fetched or found;
// 75 a failure worth retrying (the kubelet's backoff retries it); 1 a model that cannot be had.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';
import { fetchExitCodes, isFetched, modelSource } from './core/model-source.js';
import { fetchArtifact, FetchFailure, shown } from './fetch/download.js';

let progress: Record<string, unknown> = { bytes: 0, rate: 0 };

const log = (line: Record<string, unknown>) => {
  if (line.msg === 'fetching') progress = { bytes: line.bytes, total: line.total, rate: line.rate };
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
};

/** Answers GET /progress with the latest progress, for the operator's status while the fetch runs. */
function serveProgress(port: number): http.Server {
  const server = http.createServer((req, res) => {
    const ok = req.method === 'GET' && req.url === '/progress';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'application/json' });
    res.end(ok ? JSON.stringify(progress) : '{}');
  });
  // Best effort: a port taken is no reason not to fetch.
  server.on('error', () => undefined);
  server.listen(port);
  return server;
}

/** The kubelet shows this file's words as the container's termination message; it mounts it in every container. */
function terminationMessage(message: string): void {
  try {
    // r+: written only where it exists, never made on a machine that runs the fetcher outside a container.
    writeFileSync('/dev/termination-log', message, { flag: 'r+' });
  } catch {
    // Not in a container: stderr has said it.
  }
}

function arguments_() {
  const { values } = parseArgs({
    options: {
      uri: { type: 'string' },
      sha256: { type: 'string' },
      dest: { type: 'string' },
      'progress-port': { type: 'string' },
    },
  });
  return values;
}

const usage = 'usage: fetcher --uri=<s3://bucket/key|https://…> [--sha256=<hex>] --dest=<file> [--progress-port=<n>]';

async function main(): Promise<number> {
  let values: ReturnType<typeof arguments_>;
  try {
    values = arguments_();
  } catch (err) {
    // An operator and a fetcher of different versions: say so in one line, not a stack trace.
    const message = `${usage}: ${(err as Error).message}`;
    log({ msg: message });
    terminationMessage(message);
    return fetchExitCodes.unavailable;
  }
  const location = values.sha256 ? `${values.uri}@sha256:${values.sha256}` : (values.uri ?? '');
  const source = modelSource(location);
  if (!values.dest || !isFetched(source)) {
    const message = `${usage}; got ${values.uri ? shown(values.uri) : 'no --uri'}`;
    log({ msg: message });
    terminationMessage(message);
    return fetchExitCodes.unavailable;
  }
  const port = Number(values['progress-port']);
  const server = Number.isInteger(port) && port > 0 ? serveProgress(port) : undefined;
  try {
    await fetchArtifact({ source, dest: values.dest, env: process.env, log });
    return 0;
  } catch (err) {
    const failure = err instanceof FetchFailure ? err : new FetchFailure('retrying', (err as Error).message);
    log({ msg: failure.message, kind: failure.kind });
    terminationMessage(failure.message);
    return fetchExitCodes[failure.kind];
  } finally {
    server?.close();
  }
}

process.exitCode = await main();
