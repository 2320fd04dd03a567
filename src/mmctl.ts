#!/usr/bin/env node
// mmctl: what a person uses to look at and nudge the models' workflows (README "mmctl").
//   mmctl status <namespace>/<name>                 phase, conditions, pending work, the last round
//   mmctl history <namespace>/<name> [--rounds N]   the last rounds: trigger, changes, what was seen, errors
//   mmctl list [-n <namespace>] [--all]             every model's phase and workflow status
//   mmctl ui <namespace>/<name>                     the model's workflow in the Temporal Web UI
//   mmctl resync <namespace>/<name> [--wait]        look again now (with --wait: and print what happened)
//   mmctl rollout status|promote|abort|pause|resume <namespace>/<name>
//                                                   the latest canary rollout: read it, or steer it
// Human output by default; --output json for scripts. Exit codes: src/cli/exit-codes.ts.
import { Client, WithStartWorkflowOperation } from '@temporalio/client';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { workflowIdFor } from './core/api.js';
import { CliFailure, exitCodes } from './cli/exit-codes.js';
import {
  describeModel,
  listModels,
  modelStatus,
  recentRounds,
  UnknownModel,
  type ModelKey,
} from './cli/model-workflows.js';
import { renderRollout, rolloutStatus, steerRollout, type RolloutAction } from './cli/rollouts.js';
import { webUiLink } from './cli/web-ui.js';
import { renderHistory, renderList, renderOutcome, renderStatus } from './cli/render.js';
import { temporalConfigFrom, temporalOptions } from './process/temporal-config.js';
import { connectClient } from './process/temporal.js';
import { startOptions } from './temporal/workflow-client.js';
import { reconcileNowUpdate, resyncSignal, workflowType } from '../workflows/definitions.js';

type Output = 'human' | 'json';

function parseKey(value: string): ModelKey {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(value);
  if (!m)
    throw new InvalidArgumentError(`expected <namespace>/<name>, e.g. default/image-classifier-v1; got "${value}"`);
  return { namespace: m[1]!, name: m[3]! };
}

function positive(label: string) {
  return (v: string) => {
    const n = Number(v);
    if (!(n > 0)) throw new InvalidArgumentError(`${label} must be a positive number, got "${v}"`);
    return n;
  };
}

/** Prints `data` as JSON, or as `human(data)` reads it. */
function print<T>(cmd: Command, data: T, human: (d: T) => string) {
  const output = cmd.optsWithGlobals<{ output: Output }>().output;
  console.log(output === 'json' ? JSON.stringify(data, null, 2) : human(data));
}

async function withClient<T>(cmd: Command, fn: (client: Client, taskQueue: string) => Promise<T>): Promise<T> {
  let cfg: ReturnType<typeof temporalConfigFrom>;
  try {
    cfg = temporalConfigFrom(cmd.optsWithGlobals());
  } catch (err) {
    throw new CliFailure(err instanceof Error ? err.message : String(err), exitCodes.usage);
  }
  const connection = await connectClient(cfg).catch((err: unknown) => {
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new CliFailure(`cannot reach Temporal at ${cfg.address}: ${reason}`, exitCodes.temporalUnreachable);
  });
  try {
    return await fn(new Client({ connection, namespace: cfg.namespace }), cfg.taskQueue);
  } finally {
    await connection.close();
  }
}

const program = temporalOptions(new Command('mmctl'))
  .description('Inspect and resync the workflows of MachineModels')
  .addOption(new Option('-o, --output <format>', 'output format').choices(['human', 'json']).default('human'))
  .exitOverride();

program
  .command('status')
  .description('phase, conditions, pending work and the last round of a model')
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .action(async (key: ModelKey, _opts: object, cmd: Command) => {
    await withClient(cmd, async (client) => print(cmd, await modelStatus(client, key), renderStatus));
  });

program
  .command('history')
  .description("the last rounds of a model's workflow, across its runs: trigger, changes, what was seen, errors")
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .option('--rounds <n>', 'how many rounds', positive('--rounds'), 10)
  .action(async (key: ModelKey, opts: { rounds: number }, cmd: Command) => {
    await withClient(cmd, async (client) => {
      const rounds = await recentRounds(client, key, Math.floor(opts.rounds));
      print(cmd, rounds, (r) => renderHistory(`${key.namespace}/${key.name}`, r));
    });
  });

program
  .command('list')
  .description("every model's phase and workflow status")
  .option('-n, --namespace <namespace>', 'only models in this Kubernetes namespace')
  .option('-A, --all', 'also the closed workflows of deleted models')
  .action(async (opts: { namespace?: string; all?: boolean }, cmd: Command) => {
    await withClient(cmd, async (client) => print(cmd, await listModels(client, opts), renderList));
  });

program
  .command('ui')
  .description("the link to a model's workflow in the Temporal Web UI")
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .addOption(
    new Option('--ui-url <url>', 'where the Temporal Web UI is served')
      .env('MMO_TEMPORAL_UI_URL')
      .default('http://localhost:8233'),
  )
  .action(async (key: ModelKey, opts: { uiUrl: string }, cmd: Command) => {
    await withClient(cmd, async (client) => {
      const { workflowId, runId } = await describeModel(client, key);
      const url = webUiLink(opts.uiUrl, client.options.namespace, workflowId, runId);
      print(cmd, { model: `${key.namespace}/${key.name}`, url }, (d) => d.url);
    });
  });

program
  .command('resync')
  .description('ask the operator to reconcile a model now')
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .option('--wait', 'wait for the round to finish and print its outcome')
  .option('--timeout <seconds>', 'how long --wait waits', positive('--timeout'), 120)
  .action(async (key: ModelKey, opts: { wait?: boolean; timeout: number }, cmd: Command) => {
    await withClient(cmd, async (client, taskQueue) => {
      const settings = { taskQueue, workflow: {} };
      const requestedBy = `mmctl (${process.env.USER ?? 'unknown user'})`;
      const workflowId = workflowIdFor(key.namespace, key.name);
      if (!opts.wait) {
        await client.workflow.signalWithStart(workflowType, {
          ...startOptions(key, settings),
          signal: resyncSignal,
          signalArgs: [{ requestedBy }],
        });
        print(
          cmd,
          { model: `${key.namespace}/${key.name}`, workflowId, requested: true },
          () => `resync requested for ${key.namespace}/${key.name} (workflow ${workflowId})`,
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
                new CliFailure(
                  `no outcome within ${opts.timeout}s: is the operator's worker running on task queue ${taskQueue}?`,
                  exitCodes.timeout,
                ),
              ),
            opts.timeout * 1000,
          ).unref(),
        ),
      ]);
      print(cmd, outcome, (o) => renderOutcome(`${key.namespace}/${key.name}`, o));
    });
  });

const rollout = program.command('rollout').description("a model's latest canary rollout (spec.rollout)");
rollout
  .command('status')
  .description('step, weight, time left in the pause, stable and canary revisions, the verdicts so far')
  .argument('<namespace/name>', 'the MachineModel', parseKey)
  .action(async (key: ModelKey, _opts: object, cmd: Command) => {
    await withClient(cmd, async (client) => print(cmd, await rolloutStatus(client, key), renderRollout));
  });
const steering: Record<RolloutAction, string> = {
  promote: "skip the remaining steps: the canary's revision becomes stable",
  abort: 'all requests back to the stable revision, the canary removed',
  pause: "hold the current step; the pause's time left is kept",
  resume: 'go on from where it was paused',
};
for (const [action, description] of Object.entries(steering) as [RolloutAction, string][]) {
  rollout
    .command(action)
    .description(description)
    .argument('<namespace/name>', 'the MachineModel', parseKey)
    .action(async (key: ModelKey, _opts: object, cmd: Command) => {
      const by = `mmctl (${process.env.USER ?? 'unknown user'})`;
      await withClient(cmd, async (client) => print(cmd, await steerRollout(client, key, action, by), renderRollout));
    });
}

function exitCodeOf(err: unknown): number {
  if (err instanceof CliFailure) return err.exitCode;
  if (err instanceof UnknownModel) return exitCodes.unknownModel;
  return exitCodes.failed;
}

program.parseAsync(process.argv).then(
  () => process.exit(exitCodes.ok),
  (err: unknown) => {
    if (err instanceof CommanderError) {
      // Help and version exit 0; every other complaint of the parser is a usage error (already printed).
      process.exit(err.exitCode === 0 ? exitCodes.ok : exitCodes.usage);
    }
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
    process.stderr.write(`mmctl: ${err instanceof Error ? err.message : String(err)}${cause}\n`);
    process.exit(exitCodeOf(err));
  },
);
