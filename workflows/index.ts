// The workflow bundle's entry point: every workflow the worker registers.
export { machineModelWorkflow } from './machine-model.js';
export { gatewayJanitorWorkflow } from './gateway-janitor.js';
export { canaryRolloutWorkflow } from './canary-rollout.js';
