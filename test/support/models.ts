import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { MachineModelSpec } from '../../src/core/api.js';

export const seedExample = YAML.parse(
  readFileSync(fileURLToPath(new URL('../../deploy/examples/image-classifier-v1.yaml', import.meta.url)), 'utf8'),
) as { metadata: { name: string }; spec: MachineModelSpec };

export function machineModel(
  namespace: string,
  name: string,
  spec: Partial<MachineModelSpec> = {},
  metadata: object = {},
) {
  return {
    apiVersion: 'stable.example.com/v1',
    kind: 'MachineModel',
    metadata: { name, namespace, ...metadata },
    spec: {
      image: 'registry.example.com/models/classifier:v1',
      modelPath: '/models/classifier.pb',
      resources: { cpu: '100m', memory: '128Mi' },
      ...spec,
    },
  };
}
