import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chromiumArgs, ensureChromium } from '../../tools/local-stack/browser.js';
import { workflowIdFor, type RolloutSpec } from '../../src/core/api.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import type { Client } from '@temporalio/client';
import { stateQuery } from '../../workflows/definitions.js';
import { promoteUpdate } from '../../workflows/rollout-definitions.js';
import {
  installCrds,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
/** The README's screenshot of the history is this file, from a run of this test (docs/web-ui-history.png). */
const screenshot = path.join(stack.stateDir, 'web-ui-history.png');
/** docs/rollouts.md's screenshot of a rollout's story, likewise (docs/web-ui-rollout.png). */
const rolloutScreenshot = path.join(stack.stateDir, 'web-ui-rollout.png');
const k = kubectlFor(stack);
let browser: Browser;
let operator: OperatorProcess;
let ns: string;
let client: Client;

beforeAll(async () => {
  browser = await chromium.launch({ executablePath: ensureChromium(), args: chromiumArgs });
  installCrds(stack);
  client = await temporalClient(stack);
  ns = k.createNamespace('webui');
  operator = startOperatorProcess(stack, { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `mmo-${randomUUID()}` }, 'webui');
  k.apply(machineModel(ns, 'visible'));
  await eventually(
    'Ready',
    () => (k.get('machinemodel', ns, 'visible')?.status?.phase === 'Ready' ? true : undefined),
    60_000,
  );
});

afterAll(async () => {
  await operator?.stop();
  await client?.connection.close();
  await browser?.close();
});

describe('the Temporal Web UI, in a real browser', () => {
  it("finds the model's workflow by its search attributes", async () => {
    const page = await browser.newPage();
    const query = `MachineModelNamespace="${ns}" AND MachineModelPhase="Ready"`;
    // The list page loads once and does not poll: wait until visibility has indexed the workflow's
    // search attributes (they follow the status write), then open it.
    await eventually('the workflow in visibility', async () => {
      for await (const w of client.workflow.list({ query }))
        if (w.workflowId === workflowIdFor(ns, 'visible')) return true;
      return undefined;
    });
    await page.goto(
      `${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows?query=${encodeURIComponent(query)}`,
    );
    await page.getByText(workflowIdFor(ns, 'visible')).first().waitFor({ timeout: 30_000 });
    await page.close();
  });

  it('tells the story of an image update in the summaries of its steps', async () => {
    const v2 = 'registry.example.com/models/classifier:v2';
    k.apply(machineModel(ns, 'visible', { image: v2 }));
    await eventually('v2 Ready', () => {
      const mm = k.get('machinemodel', ns, 'visible');
      return mm?.status?.observedGeneration === 2 && mm.status.phase === 'Ready' ? true : undefined;
    });
    // Wide enough for the summaries to show whole in the screenshot.
    const page = await browser.newPage({ viewport: { width: 2400, height: 1300 } });
    await page.goto(
      `${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows/${encodeURIComponent(workflowIdFor(ns, 'visible'))}`,
    );
    // Kubernetes steps are local activities: the timeline names them by type, the event history
    // lists each as "Local Activity" with its summary. Without a gateway a round that only applies
    // reads, applies and writes the status in one step (its result holds the status step's summary,
    // which mmctl history prints); the wait after each round says what the round left.
    await page.getByText('Event History').first().click();
    for (const step of [
      `read MachineModel ${ns}/visible; apply its children and write its status if that is all it needs`,
      'wait for readiness (1 of 1 ready, rollout starting): look again in',
      'idle: drift check in',
    ]) {
      await page.getByText(step).first().waitFor({ timeout: 30_000 });
    }
    expect(await page.getByText('machineModelWorkflow').count()).toBeGreaterThan(0);
    await page.screenshot({ path: screenshot, fullPage: true });
    await page.close();
  });

  it("tells a canary rollout's story: the canary, its weight, its pause, and a person's promotion", async () => {
    const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 50, pause: '10m' }] };
    const v2 = 'registry.example.com/models/classifier:v2';
    k.apply(machineModel(ns, 'canaried', { rollout: plan }));
    await eventually('v1 Ready', () => (k.phaseOf(ns, 'canaried') === 'Ready' ? true : undefined), 60_000);
    k.apply(machineModel(ns, 'canaried', { image: v2, rollout: plan }));
    const workflowId = await eventually('the canary at 50 %', () => {
      const rollout = k.get('machinemodel', ns, 'canaried')?.status?.rollout;
      return rollout?.weight === 50 ? (rollout.workflowId as string) : undefined;
    });
    await client.workflow.getHandle(workflowId).executeUpdate(promoteUpdate, { args: [{ by: 'the web ui test' }] });
    await eventually('promoted', () =>
      k.get('machinemodel', ns, 'canaried')?.status?.rollout?.phase === 'Promoted' ? true : undefined,
    );
    const page = await browser.newPage({ viewport: { width: 2400, height: 1300 } });
    await page.goto(
      `${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows/${encodeURIComponent(workflowId)}`,
    );
    await page.getByText('Event History').first().click();
    for (const step of [
      `canary of ${ns}/canaried: 1 × ${v2}`,
      `send 50% of ${ns}/canaried's requests to the canary`,
      'step 1 (50%): pause, 600 s left',
    ]) {
      await page.getByText(step).first().waitFor({ timeout: 30_000 });
    }
    expect(await page.getByText('canaryRolloutWorkflow').count()).toBeGreaterThan(0);
    await page.screenshot({ path: rolloutScreenshot, fullPage: true });
    await page.close();
  });

  it('sends a manual resync from the workflow page, and the workflow runs a round for it', async () => {
    const handle = client.workflow.getHandle(workflowIdFor(ns, 'visible'));
    const before = (await handle.query(stateQuery)).rounds;
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(
      `${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows/${encodeURIComponent(workflowIdFor(ns, 'visible'))}`,
    );
    await page.getByRole('button', { name: 'More Actions' }).first().waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'More Actions' }).first().click();
    await page.getByRole('menuitem', { name: 'Send a Signal' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send a Signal' });
    // The UI offers the workflow's own signals (reconcile, resync, deleted), read from the workflow.
    await dialog.locator('button:has(#signal-select)').click();
    await page.getByRole('option', { name: 'resync', exact: true }).click();
    await dialog.locator('[contenteditable=true]').first().click();
    await page.keyboard.type('{"requestedBy":"web ui"}');
    await dialog.getByRole('button', { name: 'Submit' }).click();
    await eventually('a round for the resync', async () =>
      (await handle.query(stateQuery)).rounds > before ? true : undefined,
    );
    const signals = (await handle.fetchHistory()).events?.flatMap(
      (e) => e.workflowExecutionSignaledEventAttributes?.signalName ?? [],
    );
    expect(signals).toContain('resync');
    await page.close();
  });
});
