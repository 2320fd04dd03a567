// Connections to Temporal from the operator's configuration, and how the operator waits for Temporal.
import { readFileSync } from 'node:fs';
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import pRetry from 'p-retry';
import type { TemporalContact } from '../core/shard-assignment.js';
import type { TemporalConfig } from './temporal-config.js';
import type { Reachability } from './ready-gate.js';

/** Read once, up front: a missing certificate file is a configuration error, not something to wait for. */
function tlsOptions(cfg: TemporalConfig) {
  if (!cfg.tls) return undefined;
  const { serverName, caFile, certFile, keyFile } = cfg.tls;
  return {
    serverNameOverride: serverName,
    serverRootCACertificate: caFile ? readFileSync(caFile) : undefined,
    clientCertPair: certFile && keyFile ? { crt: readFileSync(certFile), key: readFileSync(keyFile) } : undefined,
  };
}

export function connectClient(cfg: TemporalConfig): Promise<Connection> {
  return Connection.connect(clientOptions(cfg));
}

/** A client connection that connects on first use (and reconnects on its own). */
export function lazyClient(cfg: TemporalConfig): Connection {
  return Connection.lazy(clientOptions(cfg));
}

function clientOptions(cfg: TemporalConfig): ConnectionOptions {
  return { address: cfg.address, tls: tlsOptions(cfg), apiKey: cfg.apiKey };
}

/** Returns a function that connects the worker (each call one attempt). */
export function workerConnector(cfg: TemporalConfig): () => Promise<NativeConnection> {
  const options: NativeConnectionOptions = { address: cfg.address, tls: tlsOptions(cfg), apiKey: cfg.apiKey };
  return () => NativeConnection.connect(options);
}

/**
 * The reason in a failed Temporal call, without the transport library's wrapping: the worker's
 * connection reports e.g. `tonic::transport::Error(Transport, ConnectError(... Os { ..., message:
 * "Connection refused" }))`, `... hyper::Error(Io, Kind(ConnectionReset))` or `... hyper::Error(Canceled,
 * "connection closed")`.
 */
export function temporalErrorReason(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const os = /Os \{[^}]*message: "([^"]+)"/.exec(text)?.[1];
  const custom = /error: "([^"]+)"/.exec(text)?.[1];
  const hyper = /hyper::Error\(\w+, "([^"]+)"\)/.exec(text)?.[1];
  const kind = /Kind\((\w+)\)/.exec(text)?.[1];
  const reason = os ?? custom ?? hyper ?? (kind && kind.replace(/(?<=[a-z])(?=[A-Z])/g, ' ').toLowerCase());
  if (reason) return reason;
  if (/tonic::|hyper::/.test(text)) return 'transport error';
  return text.split('\n')[0]!.slice(0, 300);
}

/** Runs `attempt` until it succeeds (capped backoff), reporting each failure; rejects only when aborted. */
export function untilTemporalAnswers<T>(
  attempt: () => Promise<T>,
  temporal: Reachability,
  signal: AbortSignal,
): Promise<T> {
  return pRetry(
    async () => {
      const value = await attempt();
      temporal.up();
      return value;
    },
    {
      retries: Infinity,
      minTimeout: 1_000,
      maxTimeout: 10_000,
      signal,
      onFailedAttempt: ({ error }) => temporal.down(temporalErrorReason(error)),
    },
  );
}

type Probed = Pick<Connection, 'workflowService' | 'withDeadline'>;

/**
 * How long this process's probes of Temporal have failed, or answered, in a row (a monotonic clock).
 * Only the probes count: a request that fails for another reason says nothing about the connection.
 */
export class ProbeStreak {
  private answered: boolean | undefined;
  private since = performance.now();

  record(answered: boolean): void {
    if (answered === this.answered) return;
    this.answered = answered;
    this.since = performance.now();
  }

  contact(): TemporalContact {
    const lasted = performance.now() - this.since;
    if (this.answered === undefined) return { downForMs: 0, upForMs: 0 };
    return this.answered ? { downForMs: 0, upForMs: lasted } : { downForMs: lasted, upForMs: 0 };
  }
}

/** Asks Temporal every few seconds whether it answers; returns a function that stops asking. */
export function watchTemporal(
  connection: Probed,
  temporal: Reachability,
  everyMs = 5_000,
  streak?: ProbeStreak,
): () => void {
  const check = () =>
    connection
      .withDeadline(Date.now() + 3_000, () => connection.workflowService.getSystemInfo({}))
      .then(
        () => {
          streak?.record(true);
          temporal.up();
        },
        (err: unknown) => {
          streak?.record(false);
          temporal.down(temporalErrorReason(err));
        },
      );
  void check();
  const timer = setInterval(() => void check(), everyMs);
  return () => clearInterval(timer);
}
