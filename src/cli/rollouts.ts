// mmctl rollout: find a model's latest canary rollout and read or steer it (updates that answer with
// the rollout's view). The model's workflow knows its rollout; the rollout's workflow answers.
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { workflowIdFor } from '../core/api.js';
import { stateQuery } from '../../workflows/definitions.js';
import {
  abortUpdate,
  pauseUpdate,
  promoteUpdate,
  resumeUpdate,
  rolloutStateQuery,
  type RolloutView,
} from '../../workflows/rollout-definitions.js';
import { CliFailure, exitCodes } from './exit-codes.js';
import { UnknownModel, type ModelKey } from './model-workflows.js';

export type RolloutAction = 'promote' | 'abort' | 'pause' | 'resume';
const updates = { promote: promoteUpdate, abort: abortUpdate, pause: pauseUpdate, resume: resumeUpdate };
const queryDeadlineMs = 5000;

export interface RolloutReport {
  model: string;
  workflowId: string;
  view: RolloutView;
}

async function rolloutIdOf(client: Client, key: ModelKey): Promise<string> {
  const model = client.workflow.getHandle(workflowIdFor(key.namespace, key.name));
  const state = await client.connection
    .withDeadline(Date.now() + queryDeadlineMs, () => model.query(stateQuery))
    .catch((err: unknown) => {
      if (err instanceof Error && err.name === 'WorkflowNotFoundError') throw new UnknownModel(key);
      throw new CliFailure(
        `the workflow of ${key.namespace}/${key.name} did not answer (is the operator running?)`,
        exitCodes.failed,
      );
    });
  if (!state.rollout)
    throw new CliFailure(
      `${key.namespace}/${key.name} has had no rollout (spec.rollout, then a new image or modelPath)`,
      exitCodes.unknownModel,
    );
  return state.rollout.workflowId;
}

export async function rolloutStatus(client: Client, key: ModelKey): Promise<RolloutReport> {
  const workflowId = await rolloutIdOf(client, key);
  const view = await client.connection.withDeadline(Date.now() + queryDeadlineMs, () =>
    client.workflow.getHandle(workflowId).query(rolloutStateQuery),
  );
  return { model: `${key.namespace}/${key.name}`, workflowId, view };
}

export async function steerRollout(
  client: Client,
  key: ModelKey,
  action: RolloutAction,
  by: string,
): Promise<RolloutReport> {
  const workflowId = await rolloutIdOf(client, key);
  const handle = client.workflow.getHandle(workflowId);
  try {
    const view = await handle.executeUpdate(updates[action], { args: [{ by }] });
    return { model: `${key.namespace}/${key.name}`, workflowId, view };
  } catch (err) {
    const reason = err instanceof WorkflowUpdateFailedError && err.cause ? err.cause.message : undefined;
    const ended = err instanceof Error && /completed|closed/i.test(err.message);
    if (reason || ended) {
      throw new CliFailure(`cannot ${action}: ${reason ?? `the rollout ${workflowId} has ended`}`, exitCodes.failed);
    }
    throw err;
  }
}

const duration = (s: number) => (s >= 60 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${s}s`);

/** Seconds left in the pause by the reader's clock while it runs; as the rollout froze it while paused. */
function secondsLeft(v: RolloutView, now: number): number | undefined {
  if (v.pauseEndsAt) return Math.max(0, Math.ceil((Date.parse(v.pauseEndsAt) - now) / 1000));
  return v.pauseSecondsLeft;
}

export function renderRollout(r: RolloutReport, now = Date.now()): string {
  const v = r.view;
  const where = v.step ? `step ${v.step} of ${v.steps}, canary ${v.weight}%` : `starting, ${v.steps} steps`;
  const s = secondsLeft(v, now);
  const left = s !== undefined ? ` (pause: ${duration(s)} left)` : '';
  const lines = [
    `${r.model}: rollout ${v.phase}${v.pausedBy ? ` by ${v.pausedBy}` : ''}, ${where}${left}`,
    `  stable    ${v.stable.image} (${v.stable.modelPath})`,
    `  canary    ${v.revision.image} (${v.revision.modelPath})`,
    `  workflow  ${r.workflowId}`,
  ];
  if (v.message) lines.push(`  message   ${v.message}`);
  if (v.verdicts.length) lines.push('  story:', ...v.verdicts.map((line) => `    ${line}`));
  return lines.join('\n');
}
