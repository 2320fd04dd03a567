import { randomUUID } from 'node:crypto';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chromiumArgs, ensureChromium } from '../../deploy/local/browser.js';
import { workflowIdFor } from '../../src/api.js';
import { eventually, kubectlFor } from '../support/cluster.js';
import { machineModel } from '../support/models.js';
import { installCrds, startOperatorProcess, type OperatorProcess } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let browser: Browser;
let operator: OperatorProcess;
let ns: string;

beforeAll(async () => {
  browser = await chromium.launch({ executablePath: ensureChromium(), args: chromiumArgs });
  installCrds(stack);
  ns = k.createNamespace('webui');
  operator = startOperatorProcess(stack, { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `mmo-${randomUUID()}` }, 'webui');
  k.apply(machineModel(ns, 'visible'));
  await eventually('Ready', () => (k.get('machinemodel', ns, 'visible')?.status?.phase === 'Ready' ? true : undefined), 60_000);
});

afterAll(async () => {
  await operator?.stop();
  await browser?.close();
});

describe('the Temporal Web UI, in a real browser', () => {
  it('finds the model\'s workflow by its search attributes', async () => {
    const page = await browser.newPage();
    const query = `MachineModelNamespace="${ns}" AND MachineModelPhase="Ready"`;
    await page.goto(`${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows?query=${encodeURIComponent(query)}`);
    await page.getByText(workflowIdFor(ns, 'visible')).first().waitFor({ timeout: 30_000 });
    await page.close();
  });

  it('shows each reconcile step by its summary', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(`${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows/${encodeURIComponent(workflowIdFor(ns, 'visible'))}`);
    for (const step of [`read MachineModel ${ns}/visible`, 'apply Deployment, Service, HPA', 'observe readiness', 'status: ready']) {
      await page.getByText(step).first().waitFor({ timeout: 30_000 });
    }
    expect(await page.getByText('machineModelWorkflow').count()).toBeGreaterThan(0);
    await page.close();
  });
});
