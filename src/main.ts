// Entry point of the operator: `tsx src/main.ts [flags]` (see --help).
import { CommanderError } from 'commander';
import { parseOperatorConfig } from './process/config.js';
import { heapLimitMiB, unboundedHeapWarning } from './process/heap-bound.js';
import { createLogger } from './process/logger.js';
import { startOperator } from './operator.js';
import { installRuntime, shutdownRequested } from './process/sdk-runtime.js';

async function main(): Promise<number> {
  let config;
  try {
    config = parseOperatorConfig(process.argv.slice(2));
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    throw err;
  }
  const log = createLogger(config.logLevel);
  const heapWarning = unboundedHeapWarning(heapLimitMiB());
  if (heapWarning) log.warn(heapWarning);
  installRuntime(log, config.logLevel, { host: config.metrics.host, port: config.metrics.sdkPort });
  const operator = startOperator(config, log);
  // The informer stops first, so no new work is queued while in-flight tasks finish.
  await Promise.race([operator.done, shutdownRequested(log).then(() => operator.stop())]);
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
