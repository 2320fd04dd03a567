// What mmctl reads from Temporal about the models' workflows: their runs, rounds, state and pending
// work. Read-only; every answer is plain data for render.ts or --output json.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Condition, Phase } from '../core/api.js';
import { workflowIdFor } from '../core/api.js';
import { stateQuery, workflowType, type WorkflowStateView } from '../../workflows/definitions.js';
import { nameAttribute, namespaceAttribute, phaseAttribute } from '../../workflows/search-attributes.js';
import { roundsOf, type HistoryEvent, type RoundRecord } from './rounds.js';

export interface ModelKey {
  namespace: string;
  name: string;
}

/** No workflow for the model: mmctl exits with its own code. */
export class UnknownModel extends Error {
  constructor(key: ModelKey) {
    super(
      `no workflow for ${key.namespace}/${key.name}: the operator has not seen this model ` +
        `(does it exist, and does the operator watch namespace ${key.namespace}?)`,
    );
  }
}

export interface ModelStatus {
  model: string;
  workflowId: string;
  runId: string;
  /** Temporal's word for the run: Running, Completed, Failed, ... */
  workflowStatus: string;
  phase?: Phase;
  conditions: Condition[];
  lastRound?: RoundRecord;
  /** A round is due (a signal came) or running; or an activity is being retried. */
  pending: string[];
  rounds?: number;
  runs?: number;
  signals?: number;
}

const queryDeadlineMs = 5_000;

export interface ModelListing {
  model: string;
  phase?: string;
  workflowStatus: string;
  workflowId: string;
  startedAt: string;
}

const statusWord = (name: string | undefined) =>
  (name ?? 'UNKNOWN')
    .toLowerCase()
    .replace(/(^|_)(\w)/g, (_, sep: string, c: string) => (sep ? ' ' : '') + c.toUpperCase());

async function notFoundAsUnknown<T>(key: ModelKey, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new UnknownModel(key);
    throw err;
  }
}

/** The model's workflow as Temporal describes its latest run. */
export function describeModel(client: Client, key: ModelKey) {
  return notFoundAsUnknown(key, () => client.workflow.getHandle(workflowIdFor(key.namespace, key.name)).describe());
}

/** The last `count` rounds of the model, oldest first, across continue-as-new runs. */
export async function recentRounds(client: Client, key: ModelKey, count: number): Promise<RoundRecord[]> {
  const { workflowId, runId } = await describeModel(client, key);
  return roundsOfWorkflow(client, workflowId, count, runId);
}

/**
 * The last `count` rounds of a workflow, oldest first: its latest run (or `latestRunId`), then the
 * runs it continued, each named by its first event (no visibility query, which may lag).
 */
export async function roundsOfWorkflow(
  client: Client,
  workflowId: string,
  count: number,
  latestRunId?: string,
): Promise<RoundRecord[]> {
  let rounds: RoundRecord[] = [];
  let runId: string | undefined = latestRunId ?? (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId && rounds.length < count) {
    const events = ((await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []) as HistoryEvent[];
    rounds = [...roundsOf(runId, events), ...rounds];
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return rounds.slice(-count);
}

export async function modelStatus(client: Client, key: ModelKey): Promise<ModelStatus> {
  const description = await describeModel(client, key);
  const { workflowId } = description;
  const handle = client.workflow.getHandle(workflowId);
  const [lastRound] = await roundsOfWorkflow(client, workflowId, 1, description.runId);
  const running = description.status.name === 'RUNNING';
  // A closed run answers no query a worker must serve; its last round says enough. A running one
  // answers only while an operator's worker polls its task queue: without one, say so and go on.
  const state: WorkflowStateView | undefined = running
    ? await client.connection
        .withDeadline(Date.now() + queryDeadlineMs, () => handle.query(stateQuery))
        .catch(() => undefined)
    : undefined;
  const pending: string[] = [];
  if (running && !state)
    pending.push(
      `no operator answered within ${queryDeadlineMs / 1000} s (is one running on task queue ${description.taskQueue}?)`,
    );
  if (state?.roundInProgress) pending.push('a round is running');
  else if (state?.pendingWork) pending.push('a round is due: something asked to look again');
  for (const a of description.raw.pendingActivities ?? []) {
    const type = a.activityType?.name ?? 'activity';
    const attempt = a.attempt ?? 1;
    const failure = a.lastFailure?.cause?.message ?? a.lastFailure?.message;
    pending.push(`${type}: attempt ${attempt}${failure ? `, last failure: ${failure}` : ''}`);
  }
  return {
    model: `${key.namespace}/${key.name}`,
    workflowId,
    runId: description.runId,
    workflowStatus: statusWord(description.status.name),
    phase: state?.phase ?? lastRound?.phaseAfter ?? lastRound?.phaseBefore,
    conditions: state?.lastOutcome?.conditions ?? [],
    lastRound,
    pending,
    rounds: state?.rounds,
    runs: state?.runs,
    signals: state?.signals,
  };
}

/**
 * Every model's workflow (its newest run), optionally in one Kubernetes namespace, sorted by model.
 * Only running ones unless `all`: a closed workflow's model is gone, and so is its phase.
 */
export async function listModels(client: Client, opts: { namespace?: string; all?: boolean }): Promise<ModelListing[]> {
  const { namespace, all } = opts;
  const filters = [`WorkflowType = '${workflowType}'`];
  if (!all) filters.push(`ExecutionStatus = 'Running'`);
  if (namespace) filters.push(`${namespaceAttribute.name} = '${namespace.replace(/'/g, '')}'`);
  const newest = new Map<string, ModelListing & { start: number }>();
  for await (const wf of client.workflow.list({ query: filters.join(' AND ') })) {
    const start = wf.startTime.getTime();
    if ((newest.get(wf.workflowId)?.start ?? -1) >= start) continue;
    newest.set(wf.workflowId, {
      model: `${wf.typedSearchAttributes.get(namespaceAttribute)}/${wf.typedSearchAttributes.get(nameAttribute)}`,
      phase: wf.status.name === 'RUNNING' ? wf.typedSearchAttributes.get(phaseAttribute) : undefined,
      workflowStatus: statusWord(wf.status.name),
      workflowId: wf.workflowId,
      startedAt: wf.startTime.toISOString(),
      start,
    });
  }
  return [...newest.values()]
    .sort((a, b) => a.model.localeCompare(b.model))
    .map(({ start: _start, ...listing }) => listing);
}
