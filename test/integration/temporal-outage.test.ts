// Temporal unreachable for a while, against the stack's own Temporal (test/scenarios/temporal-outage.ts).
import { inject } from 'vitest';
import { temporalOutage } from '../scenarios/temporal-outage.js';

temporalOutage(inject('stack'));
