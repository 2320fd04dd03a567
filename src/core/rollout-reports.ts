// Which reports a model's workflow takes from a rollout. Pure and workflow-safe.
//
// Anyone who may signal the model's workflow can send a `rolloutReport`; the workflow cannot tell
// who sent it. So a report counts only when it names the rollout the model recorded, the very run
// chain the model started (its first run's id, which the model learns from the start), and only
// while that rollout runs: a report for an ended rollout (RolledBack, Aborted, Promoted) changes
// nothing, so it cannot promote a revision that was rolled back or give a removed canary a share.
// The run's id is no secret (the model's state query and the histories show it): this keeps stale
// and mistaken reports out; a forger who can signal can still promote the running revision early,
// as `mmctl rollout promote` can (docs/security.md).
import { sameRevision, type Revision } from './rollout.js';

/** The rollout a report comes from: its workflow id and the id of its first run (kept across continue-as-new). */
export interface ReportSender {
  workflowId: string;
  firstRunId: string;
}

/** What the model's workflow recorded of its latest rollout. */
export interface RecordedRollout {
  workflowId: string;
  /**
   * The first run's id. Null until the model learns it (its start in flight, or a rollout followed after
   * a reset): the first report that names a run binds it. Absent in records of 0.2.0, whose rollouts
   * may report unnamed.
   */
  runId?: string | null;
  revision: Revision;
  running: boolean;
}

export type ReportVerdict = { take: true; bindRunId?: string } | { take: false; why: string };

export function judgeReport(
  recorded: RecordedRollout | undefined,
  report: { from?: ReportSender; view: { revision: Revision } },
): ReportVerdict {
  if (!recorded) return { take: false, why: 'no rollout is recorded' };
  if (!recorded.running) return { take: false, why: `the rollout ${recorded.workflowId} has ended` };
  if (!sameRevision(recorded.revision, report.view.revision))
    return { take: false, why: 'it names another revision than the running rollout' };
  const { from } = report;
  if (!from)
    // Only a rollout recorded before reports named their run (0.2.0) may report without a name.
    return recorded.runId === undefined ? { take: true } : { take: false, why: 'it names no rollout run' };
  if (from.workflowId !== recorded.workflowId) return { take: false, why: 'it comes from another rollout' };
  if (recorded.runId == null) return { take: true, bindRunId: from.firstRunId };
  return from.firstRunId === recorded.runId ? { take: true } : { take: false, why: 'it comes from another run' };
}
