import type { KubernetesObject } from '@kubernetes/client-node';
import type { ModelRef } from '../src/core/api.js';
import {
  buildAutoscaler,
  buildDeployment,
  buildService,
  inferenceURL,
  isSubset,
  selectorString,
  wantsAutoscaler,
  type ChildObject,
} from '../src/core/desired-state.js';
import { ownershipOf } from '../src/core/ownership.js';
import type { ActivityDeps } from './deps.js';
import { fail, kubeFailure } from './failure.js';
import { recordEventBestEffort } from './events.js';
import type { ModelSnapshot } from './read-model.js';

export interface ApplyResult {
  /** Human-readable list of what was written, e.g. "Deployment created"; empty when nothing differed. */
  changes: string[];
  inferenceURL: string;
  selector: string;
  /** The model has a HorizontalPodAutoscaler after this apply. */
  autoscaler: boolean;
}

type Live = KubernetesObject & { spec?: { replicas?: number } };
type Action = 'created' | 'updated' | 'deleted';
interface Change {
  kind: string;
  action: Action;
}
const eventReasons: Record<Action, string> = { created: 'Created', updated: 'Updated', deleted: 'Deleted' };

export function applyChildrenActivity({ kube, build }: ActivityDeps) {
  async function readChecked(ref: ModelRef, apiVersion: string, childKind: string): Promise<Live | undefined> {
    const live = await kube.read<Live>(apiVersion, childKind, ref.namespace, ref.name);
    const owner = ownershipOf(live as Parameters<typeof ownershipOf>[0], ref);
    if (owner === 'foreign') {
      throw fail(
        'NotOwned',
        `${childKind} ${ref.namespace}/${ref.name} exists and is not owned by this MachineModel; ` +
          'delete or rename it, or give the MachineModel another name',
      );
    }
    if (owner === 'previous') {
      throw fail(
        'PreviousOwner',
        `${childKind} ${ref.namespace}/${ref.name} still belongs to a deleted MachineModel of the same name; ` +
          'waiting for the garbage collector',
      );
    }
    return live;
  }

  /** Applies `desired` unless the live object already has every field we set. */
  async function ensure(desired: ChildObject, live: Live | undefined, changes: Change[]): Promise<void> {
    if (live && isSubset(desired, live)) return;
    await kube.apply(desired as KubernetesObject);
    changes.push({ kind: desired.kind, action: live ? 'updated' : 'created' });
  }

  return async function applyChildren(snapshot: ModelSnapshot): Promise<ApplyResult> {
    const { ref, spec } = snapshot;
    const changes: Change[] = [];
    try {
      const deployment = await readChecked(ref, 'apps/v1', 'Deployment');
      await ensure(buildDeployment(ref, spec, build, deployment?.spec?.replicas), deployment, changes);
      const service = await readChecked(ref, 'v1', 'Service');
      await ensure(buildService(ref, spec), service, changes);
      const hpa = await readChecked(ref, 'autoscaling/v2', 'HorizontalPodAutoscaler');
      if (wantsAutoscaler(spec)) {
        await ensure(buildAutoscaler(ref, spec, build), hpa, changes);
      } else if (hpa) {
        await kube.delete(hpa, hpa.metadata?.uid);
        changes.push({ kind: 'HorizontalPodAutoscaler', action: 'deleted' });
      }
    } catch (err) {
      throw kubeFailure(err, `applying children of MachineModel ${ref.namespace}/${ref.name}`);
    } finally {
      for (const c of changes) {
        await recordEventBestEffort(
          kube,
          ref,
          'Normal',
          eventReasons[c.action],
          `${c.kind} ${ref.namespace}/${ref.name} ${c.action}`,
        );
      }
    }
    return {
      changes: changes.map((c) => `${c.kind} ${c.action}`),
      inferenceURL: inferenceURL(ref, spec, build),
      selector: selectorString(ref.name),
      autoscaler: wantsAutoscaler(spec),
    };
  };
}
