import { Command, Option } from 'commander';
import { allComponents, componentDir } from './components.js';
import { defaultStateDir, down, healthy, readStack, up } from './stack.js';
import { temporalKinds, type TemporalKind } from './temporal-postgres.js';

const program = new Command('stack')
  .description('The local stack: Temporal dev server with Web UI, and a Kubernetes control plane with a KWOK node')
  .option('--state-dir <dir>', 'where data, logs and credentials live', defaultStateDir);

program
  .command('up')
  .description('install what is missing, start the stack (a running stack is left as it is)')
  .option('--fresh', 'wipe cluster and Temporal data before starting')
  .addOption(
    new Option('--temporal <kind>', "the CLI's dev server on SQLite, or the Temporal server on PostgreSQL")
      .choices(temporalKinds)
      .default('dev'),
  )
  .action(async (opts: { fresh?: boolean; temporal: TemporalKind }) => {
    const info = await up({
      stateDir: program.opts<{ stateDir: string }>().stateDir,
      ports: 'fixed',
      fresh: opts.fresh,
      temporal: opts.temporal,
    });
    console.log(`export KUBECONFIG=${info.kubeconfig}`);
    console.log(`export TEMPORAL_ADDRESS=${info.temporalAddress}`);
    if (info.temporalUiUrl) console.log(`# Temporal Web UI: ${info.temporalUiUrl}`);
    if (info.objectStore)
      console.log(
        `# object store (S3): ${info.objectStore.endpoint}, keys in ${info.objectStore.credentialsFile}` +
          (info.objectStore.sampleModel ? `; the digits model at ${info.objectStore.sampleModel.uri}` : ''),
      );
  });

program
  .command('down')
  .description('stop every process of the stack')
  .option('--purge', 'also delete its data, logs and credentials')
  .action(async (opts: { purge?: boolean }) => {
    await down(program.opts<{ stateDir: string }>().stateDir, opts.purge);
    console.error('stack down');
  });

program
  .command('status')
  .description('print the stack and its components')
  .action(async () => {
    const info = readStack(program.opts<{ stateDir: string }>().stateDir);
    for (const c of allComponents) console.log(`${c.name} ${c.version}\t${componentDir(c)}\t${c.purpose}`);
    if (!info) return console.log('stack: not running');
    console.log(`stack: ${(await healthy(info)) ? 'healthy' : 'unhealthy'}`);
    console.log(
      JSON.stringify(
        {
          kubeconfig: info.kubeconfig,
          temporal: info.temporalAddress,
          temporalKind: info.temporalKind,
          ui: info.temporalUiUrl,
        },
        null,
        2,
      ),
    );
  });

program.parseAsync().catch((err: unknown) => {
  console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
