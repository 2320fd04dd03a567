// Whether a MachineModel run takes a patched path: by its run version when the code that started it
// gave one, else by patched() (see patches.ts, "Run versions"). Workflow-safe.
import { patched, workflowInfo } from '@temporalio/workflow';
import { patches, type PatchId, type PatchRecord } from './patches.js';

export function takesPath(id: PatchId, runVersion: number | undefined): boolean {
  const since = (patches[id] as PatchRecord).sinceRunVersion;
  if (since === undefined || (runVersion ?? 0) < since) return patched(id);
  // During a rolling upgrade a worker of older code may have run this run's tasks and recorded the
  // marker; on replay patched() meets it (and adds nothing where there is none).
  if (workflowInfo().unsafe.isReplaying) patched(id);
  return true;
}
