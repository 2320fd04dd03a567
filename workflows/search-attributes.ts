// Search attributes that make each model's workflow findable in the Web UI. Workflow-safe.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const namespaceAttribute = defineSearchAttributeKey('MachineModelNamespace', SearchAttributeType.KEYWORD);
export const nameAttribute = defineSearchAttributeKey('MachineModelName', SearchAttributeType.KEYWORD);
export const phaseAttribute = defineSearchAttributeKey('MachineModelPhase', SearchAttributeType.KEYWORD);

/** Every attribute the workflows set: each must be registered in the Temporal namespace (deploy/temporal registers them). */
export const operatorSearchAttributes = [namespaceAttribute, nameAttribute, phaseAttribute] as const;
