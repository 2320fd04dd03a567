// The cost benchmark's harness (bench/harness) on 10 objects per contender against the test stack,
// so that it cannot rot: it asserts that every contender ran and was measured, never timings
// (those are the benchmark's to report: npm run bench:converge).
import { describe, expect, inject, it } from 'vitest';
import { contenderNames, runContender } from '../../bench/harness/run.js';

const stack = inject('stack');

describe('the benchmark harness (bench:converge) on 10 objects', () => {
  it.each(contenderNames)(
    '%s converges, is measured, and its namespace is deleted',
    async (name) => {
      const r = await runContender(stack, name, 10, (line) => console.log(line), {}, 300_000);
      console.log(`${name}: ${JSON.stringify(r)}`);
      expect(r.convergedSeconds).toBeGreaterThan(0);
      expect(r.allDeploymentsSeconds).toBeGreaterThan(0);
      expect(r.allDeploymentsSeconds).toBeLessThanOrEqual(r.convergedSeconds);
      expect(r.machineCpuSeconds).toBeGreaterThan(0);
      expect(r.cpuSeconds['kube-apiserver']).toBeGreaterThan(0);
      expect(r.peakRssMiB.etcd).toBeGreaterThan(0);
      expect(r.apiserverRequests.POST).toBeGreaterThanOrEqual(10);
      expect(r.deleteSeconds).toBeGreaterThan(0);
      if (name !== 'floor') {
        expect(r.cpuSeconds[name]).toBeGreaterThanOrEqual(0);
        expect(r.peakRssMiB[name]).toBeGreaterThan(0);
        expect(r.readyLagMs?.p50).toEqual(expect.any(Number));
      }
      if (name === 'operator') {
        expect(r.perModel?.historyEvents.p50).toBeGreaterThan(0);
        expect(r.perModel?.activities.p50).toBeGreaterThan(0);
      }
    },
    600_000,
  );
});
