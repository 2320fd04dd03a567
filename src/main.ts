// Entry point of the operator: `tsx src/main.ts [flags]` (see --help).
import { CommanderError } from 'commander';
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { parseOperatorConfig } from './config.js';
import { createLogger } from './logger.js';
import { startOperator } from './operator.js';

async function main(): Promise<number> {
  let config;
  try {
    config = parseOperatorConfig(process.argv.slice(2));
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    throw err;
  }
  const log = createLogger(config.logLevel);
  // The SDK's logs go through the same logger; shutdown signals are ours, so the informer stops first.
  Runtime.install({
    logger: new DefaultLogger((config.logLevel === 'trace' ? 'TRACE' : config.logLevel.toUpperCase()) as LogLevel, (entry) => {
      const level = entry.level === 'TRACE' ? 'trace' : (entry.level.toLowerCase() as 'debug' | 'info' | 'warn' | 'error');
      log[level]({ sdk: true, ...entry.meta }, entry.message);
    }),
    shutdownSignals: [],
  });
  const operator = await startOperator(config, log);
  let stopping: Promise<void> | undefined;
  const stop = (signal: string) => {
    log.info({ signal }, 'shutting down');
    stopping ??= operator.stop();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await operator.done;
  await stopping;
  log.info('stopped');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`machinemodel-operator: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
