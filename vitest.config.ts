import { defineConfig } from 'vitest/config';

// Two tiers. `fast`: pure logic and workflows on the time-skipping test server (no Go, no cluster,
// no Temporal server), run with `npm run test:unit`. `stack`: integration and end-to-end tests against
// one real local stack (etcd, kube-apiserver, controllers, KWOK, Temporal), one file at a time.
// `npm test` runs the tiers one after the other, so the fast tier's workers never slow a stack test.
export default defineConfig({
  test: {
    setupFiles: ['test/support/quiet-temporal.ts'],
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/unit/**/*.test.ts', 'test/workflow/**/*.test.ts'],
          globalSetup: ['test/support/time-skipping-setup.ts', 'test/support/workflow-bundle-setup.ts'],
          // Its workflow files mostly wait on their time-skipping servers: three at a time took the tier
          // from 120 s to 62–70 s on 2 cores, where vitest's default is one (four timed a test out).
          maxWorkers: 3,
          // Each of those three processes runs its files one after another, loading the Temporal SDK
          // once: 49–57 s, a quarter less CPU. The files share no state but the SDK's runtime.
          isolate: false,
          testTimeout: 30_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'stack',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/stack-setup.ts', 'test/support/time-skipping-setup.ts'],
          // The files share one real cluster and one Temporal server: one at a time.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
