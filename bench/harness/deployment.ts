// How the in-cluster Deployment runs the operator, for the benchmarks to run it the same way.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

/** The NODE_OPTIONS (heap sizes) of deploy/operator/deployment.yaml's container. */
export function deploymentNodeOptions(): string {
  const file = fileURLToPath(new URL('../../deploy/operator/deployment.yaml', import.meta.url));
  const deployment = YAML.parse(readFileSync(file, 'utf8')) as {
    spec: { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } };
  };
  const env = deployment.spec.template.spec.containers[0]?.env ?? [];
  return env.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '';
}
