// A Temporal server on PostgreSQL beside the test stack's own Temporal, for the tests that run against
// the production-shaped Temporal too. Its processes and data go when the file's tests are done.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll } from 'vitest';
import { freePort, stopProcess, type ManagedProcess } from '../../tools/local-stack/processes.js';
import type { StackInfo } from '../../tools/local-stack/stack.js';
import { removePostgresData, startPostgresTemporal } from '../../tools/local-stack/temporal-postgres.js';

/** The test stack with its Temporal swapped for a new one on PostgreSQL (same cluster). */
export async function withPostgresTemporal(stack: StackInfo): Promise<StackInfo> {
  const log = (line: string) => console.error(line);
  const stateDir = path.join(stack.stateDir, 'temporal-postgres');
  const logDir = path.join(stateDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const processes: ManagedProcess[] = [];
  afterAll(async () => {
    for (const p of processes.reverse()) await stopProcess(p);
    removePostgresData(stateDir);
  });
  const ports = { grpc: await freePort(), http: await freePort(), metrics: await freePort() };
  await startPostgresTemporal(
    {
      cliBinary: stack.binaries.temporal,
      stateDir,
      logDir,
      ports,
      namespace: stack.temporalNamespace,
      log,
    },
    (p) => (processes.push(p), p),
  );
  return {
    ...stack,
    temporalAddress: `127.0.0.1:${ports.grpc}`,
    temporalKind: 'postgres',
    temporalUiUrl: undefined,
    processes: [...stack.processes.filter((p) => p.name !== 'temporal'), ...processes],
  };
}
