// The core lifecycle and outage scenarios once more, against the production-shaped Temporal: the server
// built from go.temporal.io/server on PostgreSQL (tools/local-stack/temporal-postgres.ts), so that
// option of the stack and the benchmark cannot rot unseen.
import { describe, inject } from 'vitest';
import { operatorLifecycle } from '../scenarios/operator-lifecycle.js';
import { temporalOutage } from '../scenarios/temporal-outage.js';
import { withPostgresTemporal } from '../support/postgres-temporal.js';

const stack = await withPostgresTemporal(inject('stack'));

describe('on Temporal Server with PostgreSQL', () => {
  describe('lifecycle', () => operatorLifecycle(stack, { againstAnotherTemporal: true }));
  describe('outage', () => temporalOutage(stack, { againstAnotherTemporal: true }));
});
