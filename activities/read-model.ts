import { finalizerName, type MachineModelSpec, type ModelRef } from '../src/core/api.js';
import { validateModel } from '../src/core/validation.js';
import type { ActivityDeps } from './deps.js';
import { kubeFailure } from './failure.js';

/** The current object as a round needs it; the spec is small and makes each round readable in the UI. */
export interface ModelSnapshot {
  ref: ModelRef;
  generation: number;
  deleting: boolean;
  hasFinalizer: boolean;
  spec: MachineModelSpec;
  /** Empty when the spec is valid; otherwise messages for the Failed condition. */
  specErrors: string[];
  /**
   * Whether this worker publishes on a gateway: without one a round has no gateway step. Absent from
   * results recorded before it existed, which count as configured (the gateway steps ran).
   */
  gatewayConfigured?: boolean;
}

export function readModelActivity({ kube, gateway }: ActivityDeps) {
  return async function readModel(key: { namespace: string; name: string }): Promise<ModelSnapshot | null> {
    const obj = await kube.getModel(key.namespace, key.name).catch((err: unknown) => {
      throw kubeFailure(err, `reading MachineModel ${key.namespace}/${key.name}`);
    });
    if (!obj) return null;
    return {
      ref: { namespace: key.namespace, name: key.name, uid: obj.metadata.uid },
      generation: obj.metadata.generation ?? 0,
      deleting: !!obj.metadata.deletionTimestamp,
      hasFinalizer: (obj.metadata.finalizers ?? []).includes(finalizerName),
      spec: obj.spec,
      specErrors: validateModel(key.name, obj.spec),
      gatewayConfigured: gateway !== undefined,
    };
  };
}
