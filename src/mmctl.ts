// mmctl: what a person uses to look at and nudge a model's workflow.
//   mmctl resync <namespace>/<name> [--wait]   look again now (with --wait: and print what happened)
//   mmctl status <namespace>/<name>            the workflow's view: phase, conditions, pending work, counters
import { Client, WithStartWorkflowOperation, WorkflowNotFoundError } from '@temporalio/client';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { workflowIdFor } from './core/api.js';
import { temporalConfigFrom, temporalOptions } from './plumbing/config.js';
import { connectClient } from './plumbing/temporal.js';
import { startOptions } from './informer/workflow-client.js';
import {
  reconcileNowUpdate,
  resyncSignal,
  stateQuery,
  workflowType,
  type RoundOutcome,
} from '../workflows/definitions.js';

interface Key {
  namespace: string;
  name: string;
}

function parseKey(value: string): Key {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(value);
  if (!m)
    throw new InvalidArgumentError(`expected <namespace>/<name>, e.g. default/image-classifier-v1; got "${value}"`);
  return { namespace: m[1]!, name: m[3]! };
}

function formatOutcome(key: Key, o: RoundOutcome): string {
  const lines = [
    `${key.namespace}/${key.name}: round ${o.round}, phase ${o.phase ?? 'unknown'}${o.finished ? ' (finished)' : ''}`,
  ];
  lines.push(`  changes: ${o.changes.length ? o.changes.join(', ') : 'none'}`);
  for (const c of o.conditions) lines.push(`  ${c.type}=${c.status} ${c.reason}${c.message ? `: ${c.message}` : ''}`);
  if (o.message) lines.push(`  ${o.message}`);
  return lines.join('\n');
}

async function withClient<T>(cmd: Command, fn: (client: Client, taskQueue: string) => Promise<T>): Promise<T> {
  const cfg = temporalConfigFrom(cmd.optsWithGlobals());
  const connection = await connectClient(cfg).catch((err: unknown) => {
    throw new Error(`cannot reach Temporal at ${cfg.address}: ${err instanceof Error ? err.message : String(err)}`);
  });
  try {
    return await fn(new Client({ connection, namespace: cfg.namespace }), cfg.taskQueue);
  } finally {
    await connection.close();
  }
}

const program = temporalOptions(new Command('mmctl'))
  .description('Inspect and resync the workflows of MachineModels')
  .exitOverride();

program
  .command('resync')
  .description('ask the operator to reconcile a model now')
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .option('--wait', 'wait for the round to finish and print its outcome')
  .option(
    '--timeout <seconds>',
    'how long --wait waits',
    (v) => {
      const n = Number(v);
      if (!(n > 0)) throw new InvalidArgumentError(`--timeout must be a positive number of seconds, got "${v}"`);
      return n;
    },
    120,
  )
  .action(async (key: Key, opts: { wait?: boolean; timeout: number }, cmd: Command) => {
    await withClient(cmd, async (client, taskQueue) => {
      const settings = { taskQueue, workflow: {} };
      const requestedBy = `mmctl (${process.env.USER ?? 'unknown user'})`;
      if (!opts.wait) {
        await client.workflow.signalWithStart(workflowType, {
          ...startOptions(key, settings),
          signal: resyncSignal,
          signalArgs: [{ requestedBy }],
        });
        console.log(
          `resync requested for ${key.namespace}/${key.name} (workflow ${workflowIdFor(key.namespace, key.name)})`,
        );
        return;
      }
      const operation = new WithStartWorkflowOperation(workflowType, {
        ...startOptions(key, settings),
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      const outcome = await Promise.race([
        client.workflow.executeUpdateWithStart(reconcileNowUpdate, {
          args: [{ requestedBy }],
          startWorkflowOperation: operation,
        }),
        new Promise<never>((_, reject) =>
          setTimeout(
            () =>
              reject(
                new Error(
                  `no outcome within ${opts.timeout}s: is the operator's worker running on task queue ${taskQueue}?`,
                ),
              ),
            opts.timeout * 1000,
          ).unref(),
        ),
      ]);
      console.log(formatOutcome(key, outcome));
    });
  });

program
  .command('status')
  .description("print the workflow's view of a model")
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .action(async (key: Key, _opts: object, cmd: Command) => {
    await withClient(cmd, async (client) => {
      try {
        const state = await client.workflow.getHandle(workflowIdFor(key.namespace, key.name)).query(stateQuery);
        console.log(JSON.stringify(state, null, 2));
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) {
          throw new Error(
            `no workflow for ${key.namespace}/${key.name}: the operator has not seen this model (is it running and watching ${key.namespace}?)`,
          );
        }
        throw err;
      }
    });
  });

program.parseAsync(process.argv).then(
  () => process.exit(0),
  (err: unknown) => {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
    process.stderr.write(`mmctl: ${err instanceof Error ? err.message : String(err)}${cause}\n`);
    process.exit(1);
  },
);
