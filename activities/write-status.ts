import type { Condition, MachineModelStatus, ModelRef, Phase } from '../src/core/api.js';
import { computeStatus, statusDiffers, type StatusInput } from '../src/core/status.js';
import type { ActivityDeps } from './deps.js';
import { kubeFailure } from './failure.js';
import { apiStatus } from '../src/process/kube-errors.js';
import { recordEventBestEffort } from './events.js';

export type WriteStatusInput = Omit<StatusInput, 'now'>;

export interface WriteStatusResult {
  phase?: Phase;
  conditions: Condition[];
  changed: boolean;
}

/** Seconds precision, as metav1.Time serialises. */
function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

export function writeStatusActivity({ kube }: ActivityDeps) {
  return async function writeStatus(ref: ModelRef, input: WriteStatusInput): Promise<WriteStatusResult> {
    const action = `writing the status of MachineModel ${ref.namespace}/${ref.name}`;
    try {
      const obj = await kube.getModel(ref.namespace, ref.name);
      if (!obj || obj.metadata.uid !== ref.uid) return { conditions: [], changed: false };
      const next = computeStatus(obj.status, { ...input, now: now() });
      if (!statusDiffers(obj.status, next))
        return { phase: next.phase, conditions: next.conditions ?? [], changed: false };
      // Merge patch: keys we no longer report are removed with explicit nulls.
      const body = {
        inferenceURL: null,
        gatewayURL: null,
        selector: null,
        ready: null,
        ...next,
      } as unknown as MachineModelStatus;
      await kube.patchModelStatus(ref.namespace, ref.name, body);
      if (next.phase !== obj.status?.phase) await recordPhaseEvent(ref, next, kube);
      return { phase: next.phase, conditions: next.conditions ?? [], changed: true };
    } catch (err) {
      if (apiStatus(err) === 404) return { conditions: [], changed: false };
      throw kubeFailure(err, action);
    }
  };
}

async function recordPhaseEvent(ref: ModelRef, status: MachineModelStatus, kube: ActivityDeps['kube']): Promise<void> {
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  const message = ready?.message ?? `phase ${status.phase}`;
  switch (status.phase) {
    case 'Ready':
      return recordEventBestEffort(kube, ref, 'Normal', 'Ready', message);
    case 'Failed':
      return recordEventBestEffort(kube, ref, 'Warning', ready?.reason ?? 'Failed', message);
    case 'Pending':
      return recordEventBestEffort(kube, ref, 'Warning', 'Unschedulable', message);
    case 'Deleting':
      return recordEventBestEffort(kube, ref, 'Normal', 'Deleting', message);
    default:
      return undefined;
  }
}
