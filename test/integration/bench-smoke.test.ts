// The cost benchmark's harness (bench/harness) on 10 objects per contender against the test stack,
// so that it cannot rot: it asserts that every contender ran and was measured, never timings
// (those are the benchmark's to report: npm run bench:converge).
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { writeChart } from '../../bench/harness/chart.js';
import { contenderNames, runContender, type ContenderName, type ContenderResult } from '../../bench/harness/run.js';

const stack = inject('stack');
const results: Partial<Record<ContenderName, ContenderResult>> = {};

describe('the benchmark harness (bench:converge) on 10 objects', () => {
  it.each(contenderNames)(
    '%s converges, is measured, and its namespace is deleted',
    async (name) => {
      let measured: ContenderResult | undefined;
      // A short rest, so the at-rest phase runs too.
      const r = await runContender(stack, name, 10, (line) => console.log(line), {
        restSeconds: 5,
        giveUpSeconds: 300,
        onMeasured: (m) => (measured = structuredClone(m)),
      });
      console.log(`${name}: ${JSON.stringify(r)}`);
      results[name] = r;
      expect(r.notConverged).toBeUndefined();
      expect(r.convergedSeconds).toBeGreaterThan(0);
      expect(r.allDeploymentsSeconds).toBeGreaterThan(0);
      expect(r.allDeploymentsSeconds).toBeLessThanOrEqual(r.convergedSeconds);
      expect(r.applySeconds).toBeGreaterThan(0);
      expect(r.machineCpuSeconds).toBeGreaterThan(0);
      expect(r.cpuSeconds['kube-apiserver']).toBeGreaterThan(0);
      expect(r.peakRssMiB.etcd).toBeGreaterThan(0);
      expect(r.apiserverRequests.POST).toBeGreaterThanOrEqual(10);
      expect(r.deleteSeconds).toBeGreaterThan(0);
      // Handed over before the deletion, with everything but the deletion measured.
      expect(measured).toEqual({
        ...r,
        deleteSeconds: undefined,
        ownObjectsGoneSeconds: undefined,
        deletionCpuSeconds: undefined,
        workflowsEndedSeconds: undefined,
        workflowsEndCpuSeconds: undefined,
      });
      // What the deletion had to delete, and what it cost.
      expect(r.objectsAtDeletion?.['deployment.apps']).toBe(10);
      expect(r.deletionCpuSeconds?.machine).toBeGreaterThan(0);
      expect(r.atRest?.seconds).toBe(5);
      expect(r.atRest?.cpuSecondsPerMinute['kube-apiserver']).toBeGreaterThanOrEqual(0);
      expect(r.atRest?.machineCpuSecondsPerMinute).toBeGreaterThan(0);
      expect(r.atRest?.rssMiB.etcd).toBeGreaterThan(0);
      if (name !== 'floor') {
        expect(r.applyAloneSeconds).toBeGreaterThan(0);
        expect(r.cpuSeconds[name]).toBeGreaterThanOrEqual(0);
        expect(r.peakRssMiB[name]).toBeGreaterThan(0);
        expect(r.readyLagMs?.p50).toEqual(expect.any(Number));
        expect(r.ownObjectsGoneSeconds).toBeLessThanOrEqual(r.deleteSeconds!);
      }
      if (name === 'operator') {
        expect(r.perModel?.historyEvents.p50).toBeGreaterThan(0);
        // The deleted models' workflows end after their namespace (the deletion lane), and that is measured too.
        expect(r.workflowsEndedSeconds).toBeGreaterThanOrEqual(r.deleteSeconds!);
        expect(r.workflowsEndCpuSeconds?.machine).toBeGreaterThanOrEqual(0);
        expect(r.atRest?.historyEventsPerMinute).toBeGreaterThanOrEqual(0);
        // Kubernetes steps run as local activities (markers), regular ones only on a retry.
        expect(r.perModel?.localActivities.p50).toBeGreaterThan(0);
        expect(r.perModel?.workflowTasks.p50).toBeGreaterThan(0);
        // The SDK's workflow cache was read: every model's first task is a miss or a hit of a started run.
        expect((r.workflowCache?.hits ?? 0) + (r.workflowCache?.misses ?? 0)).toBeGreaterThan(0);
        // The slowest model's history, timed from its Deployment's availability, names its steps.
        expect(r.slowest?.story).toEqual(
          expect.arrayContaining([expect.stringMatching(/run started$/), expect.stringMatching(/local activity \w+/)]),
        );
      }
    },
    600_000,
  );

  it('draws the chart of the three', async () => {
    expect(Object.keys(results).sort()).toEqual([...contenderNames].sort());
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'bench-chart-')), 'chart.png');
    await writeChart(file, 10, results);
    const png = readFileSync(file);
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect(png.length).toBeGreaterThan(5_000);
  }, 120_000);
});
