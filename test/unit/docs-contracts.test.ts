// The contracts the docs list, against the code that defines them: each workflow's signals, queries
// and updates (docs/design.md), the workflow IDs, the activities and the failure vocabulary
// (docs/how-it-works.md). A name added, renamed or removed in the code fails here until the doc says so.
import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createActivities, type ActivityDeps } from '../../activities/index.js';
import {
  apiVersion,
  fieldManager,
  finalizerName,
  kind,
  labels,
  labelValues,
  plural,
  resyncAnnotation,
  revisionLabel,
  workflowIdFor,
} from '../../src/core/api.js';
import { failureTypes } from '../../src/core/failures.js';
import * as modelDefinitions from '../../workflows/definitions.js';
import * as rolloutDefinitions from '../../workflows/rollout-definitions.js';
import { operatorSearchAttributes } from '../../workflows/search-attributes.js';
import { gatewayStepOptions, kubeStepOptions } from '../../workflows/steps.js';
import { codeSpans, flattened, readRepoFile, tableRows } from '../support/doc-tables.js';

const definitions: Record<string, unknown> = { ...modelDefinitions, ...rolloutDefinitions };

/** Every signal, query and update the workflows define, by the name of its export. */
const messages = Object.entries(definitions).flatMap(([exported, value]) => {
  const v = value as { type?: unknown; name?: unknown } | null;
  return typeof v === 'object' && v !== null && ['signal', 'query', 'update'].includes(v.type as string)
    ? [{ exported, kind: v.type as string, name: v.name as string }]
    : [];
});

/**
 * Which workflow handles each message: the workflow function of the file in workflows/ that calls
 * setHandler with its definition.
 */
function handlers(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of readdirSync(new URL('../../workflows/', import.meta.url))) {
    const source = readRepoFile(`workflows/${file}`);
    const workflow = /export async function (\w+Workflow)\(/.exec(source)?.[1];
    for (const [, exported] of source.matchAll(/setHandler\(\s*(\w+)/g)) {
      if (!workflow) throw new Error(`workflows/${file} sets a handler for ${exported} outside a workflow function`);
      found.set(exported!, [...(found.get(exported!) ?? []), workflow]);
    }
  }
  return found;
}

describe("docs/design.md's contracts", () => {
  const contracts = Object.fromEntries(
    tableRows('docs/design.md', '## Contracts', 'thing').map((r) => [r.thing!, codeSpans(r.value!)]),
  );

  it('name the API, finalizer, field manager, labels and annotations as src/core/api.ts does', () => {
    expect(contracts.API).toEqual(expect.arrayContaining([apiVersion, kind, plural]));
    expect(contracts.finalizer?.[0]).toBe(finalizerName);
    expect(contracts['field manager']?.[0]).toBe(fieldManager);
    expect(contracts.children).toEqual(
      expect.arrayContaining([
        `${labels.name}=${labelValues.name}`,
        `${labels.instance}=<name>`,
        `${labels.managedBy}=${labelValues.managedBy}`,
      ]),
    );
    expect(contracts.rollouts).toContain(`${revisionLabel}=<revision>`);
    expect(contracts['manual resync']).toContain(`${resyncAnnotation}=<any new value>`);
  });

  it('name the search attributes the workflows set, and no other', () => {
    expect(contracts['search attributes']).toEqual(operatorSearchAttributes.map((a) => a.name));
  });
});

describe("docs/design.md's table of each workflow's messages", () => {
  const rows = tableRows('docs/design.md', "Each workflow's messages", 'workflow').map((r) => ({
    workflow: codeSpans(r.workflow!)[0],
    kind: r.kind,
    name: codeSpans(r.name!)[0],
  }));

  it('names every signal, query and update the workflows define, and no other', () => {
    const documented = rows.map((r) => `${r.kind} ${r.name}`).sort();
    expect(documented).toEqual(messages.map((m) => `${m.kind} ${m.name}`).sort());
  });

  it('says which workflow handles each', () => {
    const byHandler = handlers();
    const inCode = messages.flatMap((m) => (byHandler.get(m.exported) ?? []).map((w) => `${w} ${m.kind} ${m.name}`));
    expect(rows.map((r) => `${r.workflow} ${r.kind} ${r.name}`).sort()).toEqual(inCode.sort());
  });

  it("names the workflows' types and IDs as the code does", () => {
    const contracts = flattened('docs/design.md');
    const { workflowType, janitorWorkflowType, janitorWorkflowId } = modelDefinitions;
    const { rolloutWorkflowType, rolloutWorkflowId } = rolloutDefinitions;
    expect(contracts).toContain(`\`${workflowIdFor('<namespace>', '<name>')}\` (type \`${workflowType}\`)`);
    expect(contracts).toContain(`\`${janitorWorkflowId('<task queue>')}\` (type \`${janitorWorkflowType}\`)`);
    expect(contracts).toContain(
      `\`${rolloutWorkflowId({ namespace: '<ns>', name: '<name>' }, '<revision>')}\` (type \`${rolloutWorkflowType}\``,
    );
  });
});

describe("docs/how-it-works.md's table of activities", () => {
  const rows = tableRows('docs/how-it-works.md', '- Activities (', 'activity');

  it('names every activity the worker registers, and no other', () => {
    const documented = rows.flatMap((r) => codeSpans(r.activity!)).sort();
    expect(documented).toEqual(Object.keys(createActivities({} as ActivityDeps)).sort());
  });

  it('names files that are in activities/', () => {
    const missing = rows
      .map((r) => codeSpans(r['in `activities/`']!)[0]!)
      .filter((f) => !existsSync(new URL(`../../activities/${f}`, import.meta.url)));
    expect(missing).toEqual([]);
  });
});

describe("docs/how-it-works.md's failure vocabulary", () => {
  it('has each failure type of src/core/failures.ts with its policy, and no other', () => {
    const rows = tableRows('docs/how-it-works.md', '**Failures**', 'failure');
    const documented = Object.fromEntries(rows.map((r) => [codeSpans(r.failure!)[0], r.policy]));
    expect(documented).toEqual(failureTypes);
  });

  it("states the steps' retry policies", () => {
    const page = flattened('docs/how-it-works.md');
    const seconds = (d: unknown) => `${String(d).replace(/ seconds?$/, '')} s`;
    const kube = kubeStepOptions.retry!;
    expect(page).toContain(
      `a Kubernetes step with backoff ${seconds(kube.initialInterval)} → ${seconds(kube.maximumInterval)}`,
    );
    expect(kube.maximumAttempts).toBeUndefined();
    expect(page).toContain(`a gateway step ${gatewayStepOptions.retry!.maximumAttempts} times`);
  });
});
