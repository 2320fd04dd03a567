// The operator's life with its models, against the stack's own Temporal (test/scenarios/operator-lifecycle.ts).
import { inject } from 'vitest';
import { operatorLifecycle } from '../scenarios/operator-lifecycle.js';

operatorLifecycle(inject('stack'));
