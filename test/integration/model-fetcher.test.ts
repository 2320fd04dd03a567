// The fetch-model init container's program against a real S3 store (SeaweedFS, started here): it
// fetches and verifies, resumes a part a killed attempt left, finds what the node has, and says in
// the store's words why it cannot have a model, with the exit code that tells the kubelet whether to
// retry. Run as the image runs it (node dist/src/fetcher.js), outside a cluster.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  putObject,
  readCredentials,
  startObjectStore,
  type ObjectStoreInfo,
} from '../../tools/local-stack/object-store.js';
import { stopProcess, type ManagedProcess } from '../../tools/local-stack/processes.js';
import { CountingProxy } from '../support/counting-proxy.js';
import { takeLock } from '../../src/fetch/cache-lock.js';

const fetcher = fileURLToPath(new URL('../../dist/src/fetcher.js', import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), 'mmo-fetcher-'));
const processes: ManagedProcess[] = [];
let store: ObjectStoreInfo;
let proxy: CountingProxy;

interface Run {
  code: number | null;
  lines: Record<string, unknown>[];
  stderr: string;
}

/** The fetcher with the Secret's environment; `onLine` may kill it. */
function runFetcher(args: string[], env: Record<string, string>, onStart?: (kill: () => void) => void): Promise<Run> {
  const child = spawn(process.execPath, [fetcher, ...args], { env: { PATH: process.env.PATH, ...env } });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  onStart?.(() => child.kill('SIGKILL'));
  return new Promise((resolve) =>
    child.on('exit', (code) =>
      resolve({
        code,
        stderr,
        lines: stderr
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      }),
    ),
  );
}

const secretEnv = (endpoint = proxy.endpoint, keys = readCredentials(store)) => ({
  AWS_ENDPOINT_URL: endpoint,
  AWS_REGION: store.region,
  AWS_ACCESS_KEY_ID: keys.accessKeyId,
  AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const dest = (name: string) => path.join(dir, 'cache', name, 'model.bin');
/** Where the fetcher keeps the part of `target`: in the folder's hidden .fetch/, apart from artifact names. */
const partOf = (target: string) => path.join(path.dirname(target), '.fetch', `${path.basename(target)}.part`);

beforeAll(async () => {
  store = await startObjectStore(
    { stateDir: dir, logFile: path.join(dir, 'object-store.log'), log: (l) => console.error(l) },
    (p) => (processes.push(p), p),
  );
  proxy = await CountingProxy.start(store.endpoint);
}, 900_000);

afterAll(async () => {
  await proxy?.stop();
  for (const p of processes) await stopProcess(p);
  rmSync(dir, { recursive: true, force: true });
});

describe('the model fetcher against a real S3 store', () => {
  it('fetches and verifies an artifact, and a second fetch on the node fetches 0 bytes', async () => {
    const body = randomBytes(3 * 2 ** 20);
    const { uri, sha256 } = await putObject(store, 'small/model.bin', body);
    const target = dest('small');
    const first = await runFetcher([`--uri=${uri}`, `--sha256=${sha256}`, `--dest=${target}`], secretEnv());
    expect(first.code, first.stderr).toBe(0);
    expect(sha(readFileSync(target))).toBe(sha256);
    expect(first.lines.at(-1)).toMatchObject({ msg: 'fetched and verified', fetched: body.length, sha256 });
    const before = proxy.bytes;
    const again = await runFetcher([`--uri=${uri}`, `--sha256=${sha256}`, `--dest=${target}`], secretEnv());
    expect(again.code).toBe(0);
    expect(again.lines.at(-1)).toMatchObject({ fetched: 0 });
    expect(proxy.bytes - before).toBe(0);
  });

  it('resumes a 64 MiB artifact whose fetcher was killed halfway: at most 1.15x its bytes fetched, the sum verified', async () => {
    const body = randomBytes(64 * 2 ** 20);
    const { uri, sha256 } = await putObject(store, 'big/model.bin', body);
    const target = dest('big');
    const args = [`--uri=${uri}`, `--sha256=${sha256}`, `--dest=${target}`];
    const start = proxy.bytes;
    // Slowed to 16 MiB/s, so that the kill lands halfway and not after the last byte.
    proxy.throttle = 16 * 2 ** 20;
    const killed = await runFetcher(args, secretEnv(), (kill) => {
      const timer = setInterval(() => {
        if (existsSync(partOf(target)) && statSync(partOf(target)).size >= body.length / 2) {
          clearInterval(timer);
          kill();
        }
      }, 20);
    });
    proxy.throttle = 0;
    expect(killed.code).toBe(null);
    const left = statSync(partOf(target)).size;
    expect(left).toBeGreaterThanOrEqual(body.length / 2);
    expect(left).toBeLessThan(body.length);
    // The killed fetcher's lock is stale after 20 s; the next one takes it over and resumes.
    const resumed = await runFetcher(args, secretEnv());
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.lines.at(-1)).toMatchObject({ msg: 'fetched and verified', resumed: left, sha256 });
    expect(resumed.lines.some((l) => l.msg === 'taking over a lock its holder left')).toBe(true);
    const fetched = proxy.bytes - start;
    console.log(`64 MiB artifact: ${fetched} bytes fetched over two attempts (${(fetched / body.length).toFixed(3)}x)`);
    expect(fetched / body.length).toBeLessThanOrEqual(1.15);
    expect(sha(readFileSync(target))).toBe(sha256);
  }, 300_000);

  it('never serves an artifact whose sum differs: exit 1 with both sums, nothing left to resume', async () => {
    const body = randomBytes(2 ** 20);
    const { uri, sha256 } = await putObject(store, 'flipped/model.bin', body);
    body[1000]! ^= 0x01;
    await putObject(store, 'flipped/model.bin', body);
    const target = dest('flipped');
    const run = await runFetcher([`--uri=${uri}`, `--sha256=${sha256}`, `--dest=${target}`], secretEnv());
    expect(run.code).toBe(1);
    const message = String(run.lines.at(-1)?.msg);
    expect(message).toContain(sha256);
    expect(message).toContain(sha(body));
    expect(existsSync(target)).toBe(false);
    expect(existsSync(partOf(target))).toBe(false);
  });

  it("reports a missing object, no keys and wrong keys at once (exit 1), in the store's words", async () => {
    const missing = await runFetcher(['--uri=s3://models/nothing/here.bin', `--dest=${dest('missing')}`], secretEnv());
    expect(missing.code).toBe(1);
    expect(String(missing.lines.at(-1)?.msg)).toMatch(/404 NoSuchKey/);
    const { uri } = await putObject(store, 'guarded/model.bin', randomBytes(1024));
    const anonymous = await runFetcher([`--uri=${uri}`, `--dest=${dest('anonymous')}`], {
      AWS_ENDPOINT_URL: proxy.endpoint,
    });
    expect(anonymous.code).toBe(1);
    expect(String(anonymous.lines.at(-1)?.msg)).toMatch(/403/);
    const wrong = await runFetcher(
      [`--uri=${uri}`, `--dest=${dest('wrong')}`],
      secretEnv(proxy.endpoint, { accessKeyId: 'NOTAKEY', secretAccessKey: 'not-a-secret' }),
    );
    expect(wrong.code).toBe(1);
    expect(String(wrong.lines.at(-1)?.msg)).toMatch(/403/);
    expect(wrong.stderr).not.toContain('not-a-secret');
    expect(wrong.stderr).not.toContain(readCredentials(store).secretAccessKey);
  });

  it('exits 75 for a store that answers 503 (the kubelet retries), and fetches once it recovers', async () => {
    const { uri, sha256 } = await putObject(store, 'busy/model.bin', randomBytes(2 ** 20));
    const args = [`--uri=${uri}`, `--sha256=${sha256}`, `--dest=${dest('busy')}`];
    proxy.failNext = 2;
    for (let i = 0; i < 2; i++) {
      const busy = await runFetcher(args, secretEnv());
      expect(busy.code).toBe(75);
      expect(String(busy.lines.at(-1)?.msg)).toMatch(/503 SlowDown/);
    }
    const recovered = await runFetcher(args, secretEnv());
    expect(recovered.code).toBe(0);
  });

  it('exits 75 for a store it cannot reach', async () => {
    const run = await runFetcher(
      ['--uri=s3://models/x/model.bin', `--dest=${dest('unreachable')}`],
      secretEnv('http://127.0.0.1:1'),
    );
    expect(run.code).toBe(75);
    expect(String(run.lines.at(-1)?.msg)).toMatch(/cannot reach the store/);
  });

  it('lets one fetcher of many take over a stale lock, never two at once', async () => {
    const lock = path.join(dir, 'locks', 'model.bin.lock');
    mkdirSync(lock, { recursive: true });
    writeFileSync(path.join(lock, 'owner'), 'a fetcher that was killed');
    utimesSync(lock, new Date(0), new Date(0));
    let holders = 0;
    let most = 0;
    let turns = 0;
    const log = () => undefined;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        const held = await takeLock(lock, { staleMs: 2_000, done: async () => false, log });
        holders++;
        most = Math.max(most, holders);
        turns++;
        expect(await held!.stillMine()).toBe(true);
        await sleep(100);
        holders--;
        await held!.release();
      }),
    );
    expect(turns).toBe(6);
    expect(most).toBe(1);
  });
});
