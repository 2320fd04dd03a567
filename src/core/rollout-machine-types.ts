// The rollout machine's words (src/core/rollout-machine.ts): what it is given, the state it keeps,
// the events it is told and the commands it answers with. A run continued as new carries its
// MachineState in its input: a change must keep reading what the release before wrote.
import type { RolloutSpec } from './api.js';
import type { CanaryHealth, TrafficSample } from './rollout.js';

export interface MachineInput {
  plan: RolloutSpec;
  stableReplicas: number;
  /** How often the rollout looks at the canary during a pause, and while paused. */
  checkSeconds: number;
  /** How long the canary may take to be ready in a step. */
  readyDeadlineSeconds: number;
}

export type Outcome = 'Promoted' | 'RolledBack' | 'Aborted';
/** How a rollout ends (the model's workflow cancelling it, for a newer revision or a deletion, ends the run instead). */
export interface Ending {
  outcome: Outcome;
  check?: 'Ready' | 'ErrorRate';
  message: string;
}

export type Stage =
  /** Looking at the canary until it is ready; `since` starts the ready deadline, `wait` is the next backoff. */
  | { kind: 'readying'; since: number; wait: number; looking: boolean }
  /** The step's weight being set. */
  | { kind: 'weighting' }
  /** The pause: the gateway's counters read first, then looks until `pauseEndsAt` (frozen while paused). */
  | { kind: 'holding'; counted: boolean; looking: boolean; pauseEndsAt?: number; frozenMs?: number }
  /** Its share being taken back; then the step again (`again`) or a person asked (`ask`). */
  | { kind: 'unweighting'; then: 'again' | 'ask' }
  /**
   * Held by the analysis for a person: a resume accepts the step (`next`) or tries it again (`retry`).
   * A canary that keeps its share meanwhile is looked at, as in a pause.
   */
  | { kind: 'asking'; then: 'next' | 'retry'; looking: boolean }
  /** Its share back to the stable revision, then the canary removed (a promoted one stays for the model). */
  | { kind: 'ending'; ending: Ending; withdrawn: boolean; removed: boolean }
  | { kind: 'ended'; ending: Ending };

export interface MachineState {
  /** The current step, 0-based. */
  step: number;
  stage: Stage;
  /** The weight the canary was last given on the gateway. */
  weight: number;
  paused?: 'person' | 'analysis';
  asked: { promote: boolean; abort: boolean };
  /** Since when the canary has been found unable to carry its share, in this step. */
  unreadySince?: number;
  /** How long it was so before, in this step: one ready deadline for all its tries. */
  unreadyMs?: number;
  /** How many times this step started over because its canary lost readiness. */
  restarts?: number;
  /** The step's requests so far, and the gateway's last reading. */
  seen?: TrafficSample;
  last?: TrafficSample;
  message?: string;
  /** The last verdicts and commands, newest last. */
  notes: string[];
}

export type MachineEvent =
  | { kind: 'start'; at: number }
  /** A look's answer: the canary's health and, during the pause, the gateway's counters (undefined: not reported). */
  | { kind: 'looked'; at: number; health: CanaryHealth; traffic?: TrafficSample }
  | { kind: 'weight-set'; at: number }
  /** The model's round gave the canary no share: it found it unable to carry one. */
  | { kind: 'weight-refused'; at: number }
  | { kind: 'counted'; at: number; traffic?: TrafficSample }
  | { kind: 'removed'; at: number }
  /** A hold ended: its time ran out, or a person acted. */
  | { kind: 'woke'; at: number };

export type MachineCommand =
  /** Apply the canary at this size and report its health (during the pause, with the gateway's counters). */
  | { do: 'look'; replicas: number; withTraffic: boolean }
  | { do: 'set-weight'; weight: number }
  /** Read the gateway's counters. */
  | { do: 'count' }
  | { do: 'remove' }
  /** Wait this long (undefined: until a person acts), or until a person acts. */
  | { do: 'hold'; seconds?: number; summary: string }
  | { do: 'finish'; ending: Ending };

export interface Decision {
  state: MachineState;
  command: MachineCommand;
}

export type PersonCommand = 'promote' | 'abort' | 'pause' | 'resume';
