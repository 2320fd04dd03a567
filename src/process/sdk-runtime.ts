import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import type { Logger } from 'pino';

/**
 * Routes the Temporal SDK's logs through our logger and, given `metrics`, serves the SDK's own worker
 * metrics there in Prometheus format; shutdown signals are handled by the caller.
 */
export function installRuntime(log: Logger, level: string, metrics?: { host: string; port: number }): void {
  Runtime.install({
    telemetryOptions: metrics?.port
      ? {
          metrics: { prometheus: { bindAddress: `${metrics.host}:${metrics.port}`, countersTotalSuffix: true } },
        }
      : undefined,
    logger: new DefaultLogger(level.toUpperCase() as LogLevel, (entry) => {
      const method = entry.level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error';
      log[method]({ sdk: true, ...entry.meta }, entry.message);
    }),
    shutdownSignals: [],
  });
}

/** Resolves on the first SIGTERM or SIGINT. */
export function shutdownRequested(log: Logger): Promise<string> {
  return new Promise((resolve) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        log.info({ signal }, 'shutting down');
        resolve(signal);
      });
    }
  });
}
