import { describe, expect, inject, it } from 'vitest';
import { badInputs } from '../support/bad-inputs.js';
import { kubectlFor } from '../support/cluster.js';
import { installCrds } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);

describe('admission of MachineModels by the CRD', () => {
  installCrds(stack);
  const ns = k.createNamespace('admission');

  it.each(badInputs)('rejects $title with a message that names the field', ({ name, spec, expect: words }) => {
    const obj = {
      apiVersion: 'stable.example.com/v1',
      kind: 'MachineModel',
      metadata: { name: name ?? 'bad', namespace: ns },
      spec,
    };
    let message = '';
    try {
      k.apply(obj);
    } catch (err) {
      message = String((err as { stderr?: string }).stderr);
    }
    expect(message).toMatch(/invalid|Invalid|Unsupported|Required/);
    expect(message).toMatch(words);
    expect(k.list('machinemodel', ns)).toHaveLength(0);
  });

  it('defaults replicas and endpoint type and fills printer columns', () => {
    k.apply({
      apiVersion: 'stable.example.com/v1',
      kind: 'MachineModel',
      metadata: { name: 'defaults', namespace: ns },
      spec: { image: 'registry.example.com/m:1', modelPath: '/m', resources: { cpu: '1', memory: '1Gi' } },
    });
    const mm = k.get('machinemodel', ns, 'defaults');
    expect(mm.spec).toMatchObject({ minReplicas: 1, maxReplicas: 1, endpointType: 'REST' });
    const header = k.kubectl('-n', ns, 'get', 'mm').split('\n')[0];
    expect(header).toMatch(/NAME\s+PHASE\s+READY\s+URL\s+AGE/);
  });

  it('takes whole-number quantities as a Pod does', () => {
    k.apply({
      apiVersion: 'stable.example.com/v1',
      kind: 'MachineModel',
      metadata: { name: 'numbers', namespace: ns },
      spec: { image: 'registry.example.com/m:1', modelPath: '/m', resources: { cpu: 2, memory: 1073741824 } },
    });
    expect(k.get('machinemodel', ns, 'numbers').spec.resources).toEqual({ cpu: 2, memory: 1073741824 });
  });
});
