// The core lifecycle once more, against the production-shaped Temporal: the server built from
// go.temporal.io/server on PostgreSQL (tools/local-stack/temporal-postgres.ts), so that option of the
// stack and the benchmark cannot rot unseen. The outage scenarios run against the dev server only: they
// cut the network in front of Temporal (a TCP proxy), which the server behind it never sees.
import { describe, inject } from 'vitest';
import { operatorLifecycle } from '../scenarios/operator-lifecycle.js';
import { withPostgresTemporal } from '../support/postgres-temporal.js';

const stack = await withPostgresTemporal(inject('stack'));

describe('on Temporal Server with PostgreSQL', () => {
  describe('lifecycle', () => operatorLifecycle(stack, { againstAnotherTemporal: true }));
});
