// The in-memory cluster and gateway that workflow tests run the real workflow code against: its
// stubbed activities read and write this object instead of an apiserver.
import { ApplicationFailure } from '@temporalio/common';
import type { Activities, ModelSnapshot } from '../../activities/index.js';
import type { GatewayInspection } from '../../activities/publication.js';
import { readAndApplyActivity } from '../../activities/read-and-apply.js';
import { finalizerName, type MachineModelSpec, type MachineModelStatus } from '../../src/core/api.js';
import type { ContainerTrouble } from '../../src/core/container-troubles.js';
import { canaryShare, canaryUpkeep, type LiveCanary } from '../../src/core/canary-state.js';
import type { ModelRoundInput } from '../fixtures/rollout-harness-workflow.js';
import {
  revisionName,
  revisionOf,
  sameRevision,
  stableRevisionFor,
  type Revision,
  type TrafficSample,
} from '../../src/core/rollout.js';
import { computeStatus, type Readiness } from '../../src/core/status.js';
import { validateModel } from '../../src/core/validation.js';

/** An in-memory MachineModel and Deployment that the stubbed activities read and write. */
export class FakeCluster {
  exists = true;
  /** The model's name; tests whose workflows outlive them (a rollout's) give each model its own. */
  name = 'm';
  uid = 'uid-1';
  generation = 1;
  deleting = false;
  finalizers: string[] = [];
  spec: MachineModelSpec = {
    image: 'registry.example/m:1',
    modelPath: '/models/m',
    resources: { cpu: '1', memory: '1Gi' },
  };
  ready = false;
  status: MachineModelStatus | undefined;
  verdicts: string[] = [];
  calls: Record<string, number> = {};
  eventReasons: string[] = [];
  applyFailure: ApplicationFailure | undefined;
  /** How many of the next applyChildren calls fail with a retryable (Transient) failure. */
  applyTransientFailures = 0;
  /** How many of the next writeStatus calls fail with a retryable (Transient) failure. */
  statusTransientFailures = 0;
  /** Makes applyChildren take real time, so signals can arrive while a round runs. */
  applyDelayMs = 0;
  /** What applyChildren says it wrote ("Kind/resourceVersion"). */
  written: string[] = [];
  /** The same for removeFinalizer, the last step of a deletion round. */
  removeFinalizerDelayMs = 0;
  /** Set: the object that removeFinalizer lets go is replaced at once by a new one of the same name with this uid. */
  recreateAs: string | undefined;
  gatewayConfigured = false;
  gatewayDown = false;
  /** Route ids (uids) on the fake gateway. */
  routes = new Set<string>();
  /** What the gateway janitor's next sweep finds. */
  inspection: GatewayInspection = { orphans: [], collisions: [], unpublished: [] };
  /** Route ids the janitor removed. */
  withdrawn: string[] = [];
  /** The revision the stable Deployment runs; set by the first apply. */
  deployed: Revision | undefined;
  /** The canary of a rollout: whether it is ready, why not, its requests on the gateway since it started. */
  canary = {
    exists: false,
    ready: true,
    trouble: undefined as ContainerTrouble | undefined,
    traffic: undefined as TrafficSample | undefined,
    replicas: 0,
    /** The revision (revisionName) the canary objects were last applied for. */
    revision: '',
    /** The canary's share on the route. */
    weight: 0,
    /** Every change of that share, in order. */
    weights: [] as number[],
    removed: 0,
  };

  /** The canary Deployment as applyChildren reads it. */
  private liveCanary(): LiveCanary | undefined {
    const c = this.canary;
    if (!c.exists) return undefined;
    return { revision: c.revision, replicas: c.replicas, readyReplicas: c.ready && !c.trouble ? c.replicas : 0 };
  }

  private putShare(weight: number) {
    if (weight === this.canary.weight) return;
    this.canary.weight = weight;
    this.canary.weights.push(weight);
  }

  private applyCanary(revision: Revision, replicas: number) {
    this.count('applyCanary');
    Object.assign(this.canary, { exists: true, replicas, revision: revisionName(revision) });
  }

  private removeCanary() {
    if (!this.canary.exists) return false;
    Object.assign(this.canary, { exists: false, replicas: 0, revision: '' });
    this.canary.removed++;
    return true;
  }

  /** The model's round as the rollout harness plays it (test/fixtures/rollout-harness-workflow.ts). */
  private modelRound({ input, want, ended }: ModelRoundInput): number {
    this.count('modelRound');
    const rollout = ended
      ? undefined
      : { revision: input.revision, plan: input.plan, stableReplicas: input.stableReplicas, ...(want ? { want } : {}) };
    const live = this.liveCanary();
    const weight = canaryShare(rollout, live);
    this.putShare(weight);
    const upkeep = canaryUpkeep(rollout, live, ended === 'Promoted');
    if (upkeep.do === 'apply') this.applyCanary(input.revision, upkeep.replicas);
    if (upkeep.do === 'remove') this.removeCanary();
    return weight;
  }

  private count(name: string) {
    this.calls[name] = (this.calls[name] ?? 0) + 1;
  }

  activities(): Activities & { modelRound(i: ModelRoundInput): Promise<number> } {
    const ref = () => ({ namespace: 'default', name: this.name, uid: this.uid });
    const readiness = (): Readiness => ({
      found: true,
      desiredReplicas: 1,
      replicas: 1,
      readyReplicas: this.ready ? 1 : 0,
      availableReplicas: this.ready ? 1 : 0,
      updatedReplicas: 1,
      observedLatest: true,
      available: { status: this.ready ? 'True' : 'False', reason: 'MinimumReplicasAvailable', message: '' },
    });
    const activities: Omit<Activities, 'readAndApply'> = {
      readModel: async (): Promise<ModelSnapshot | null> => {
        this.count('readModel');
        if (!this.exists) return null;
        return {
          ref: ref(),
          generation: this.generation,
          deleting: this.deleting,
          hasFinalizer: this.finalizers.includes(finalizerName),
          spec: this.spec,
          specErrors: validateModel(this.name, this.spec),
          gatewayConfigured: this.gatewayConfigured,
        };
      },
      ensureFinalizer: async () => {
        this.count('ensureFinalizer');
        this.finalizers.push(finalizerName);
        return { added: true };
      },
      applyChildren: async (_snapshot, options = {}) => {
        this.count('applyChildren');
        const stable = stableRevisionFor(this.spec, this.deployed, options.promoted);
        this.deployed = stable;
        const rollout = this.spec.rollout
          ? { stable, ...(sameRevision(stable, revisionOf(this.spec)) ? {} : { pending: revisionOf(this.spec) }) }
          : undefined;
        if (this.applyDelayMs) await new Promise((r) => setTimeout(r, this.applyDelayMs));
        if (this.applyFailure) throw this.applyFailure;
        if (this.applyTransientFailures > 0) {
          this.applyTransientFailures--;
          throw ApplicationFailure.retryable('the apiserver answered 503', 'Transient');
        }
        return {
          changes: [],
          inferenceURL: 'http://m.default.svc.cluster.local:80',
          selector: 'app=m',
          autoscaler: false,
          readiness: readiness(),
          written: this.written,
          ...(rollout ? { rollout } : {}),
          ...(this.canary.exists ? { canary: true, liveCanary: this.liveCanary() } : {}),
        };
      },
      writeStatus: async (_ref, input) => {
        this.count('writeStatus');
        if (this.statusTransientFailures > 0) {
          this.statusTransientFailures--;
          throw ApplicationFailure.retryable('the apiserver answered 503', 'Transient');
        }
        this.verdicts.push(input.verdict.kind);
        this.status = computeStatus(this.status, { ...input, now: new Date().toISOString() });
        return { phase: this.status.phase, conditions: this.status.conditions ?? [], changed: true };
      },
      removeFinalizer: async () => {
        this.count('removeFinalizer');
        if (this.removeFinalizerDelayMs) await new Promise((r) => setTimeout(r, this.removeFinalizerDelayMs));
        this.finalizers = this.finalizers.filter((f) => f !== finalizerName);
        if (this.deleting && this.recreateAs) {
          Object.assign(this, { uid: this.recreateAs, deleting: false, status: undefined, recreateAs: undefined });
        } else if (this.deleting) {
          this.exists = false;
        }
        return { removed: true };
      },
      recordModelEvent: async (_ref, _type, reason) => {
        this.count('recordModelEvent');
        this.eventReasons.push(reason);
      },
      registerRoute: async (model, share = 0) => {
        this.count('registerRoute');
        if (this.gatewayConfigured && !this.gatewayDown) this.putShare(share);
        if (!this.gatewayConfigured) return { configured: false, registered: false, changes: [] };
        if (this.gatewayDown)
          throw ApplicationFailure.retryable('Caddy admin API is unreachable', 'GatewayUnavailable');
        this.routes.add(model.ref.uid);
        const url = 'http://gateway.example/models/default/m';
        return {
          configured: true,
          registered: true,
          url,
          changes: [],
          condition: { type: 'GatewayRegistered', status: 'True', reason: 'Registered', message: url },
        };
      },
      unregisterRoute: async (r) => {
        this.count('unregisterRoute');
        if (this.gatewayConfigured && this.gatewayDown)
          throw ApplicationFailure.retryable('Caddy admin API is unreachable', 'GatewayUnavailable');
        return { removed: this.routes.delete(r.uid) };
      },
      inspectGateway: async () => {
        this.count('inspectGateway');
        // Each sweep finds what the test put on the fake gateway once.
        const found = this.inspection;
        this.inspection = { orphans: [], collisions: [], unpublished: [] };
        return found;
      },
      removeOrphanRoute: async (route) => {
        this.count('removeOrphanRoute');
        this.withdrawn.push(route.id);
        return { removed: true };
      },
      removeCollidingRoute: async (route) => {
        this.count('removeCollidingRoute');
        this.withdrawn.push(route.id);
        return { removed: true };
      },
      syncCanary: async ({ canary }) => {
        this.count('syncCanary');
        if (!canary) return { changes: this.removeCanary() ? ['canary removed'] : [] };
        this.applyCanary(canary.revision, canary.replicas);
        return { changes: [`canary: ${canary.replicas}`] };
      },
      canaryHealth: async ({ revision, replicas }) => {
        this.count('canaryHealth');
        const live = this.liveCanary();
        if (!live || live.revision !== revisionName(revision)) return { readyReplicas: 0, desiredReplicas: replicas };
        return {
          readyReplicas: Math.min(live.readyReplicas, replicas),
          desiredReplicas: replicas,
          ...(this.canary.trouble ? { trouble: this.canary.trouble } : {}),
        };
      },
      canaryTraffic: async () => {
        this.count('canaryTraffic');
        return this.canary.traffic ? { ...this.canary.traffic } : undefined;
      },
    };
    // The real composition of the steps, over the fakes.
    return {
      ...activities,
      readAndApply: readAndApplyActivity(activities),
      modelRound: async (i: ModelRoundInput) => this.modelRound(i),
    };
  }
}
