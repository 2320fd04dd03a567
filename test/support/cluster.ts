import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { realNodeAnnotationArgs } from '../../tools/local-stack/real-node.js';
import { kubectlRun, type StackInfo } from '../../tools/local-stack/stack.js';

/** kubectl against the test stack, as a user would run it. */
export function kubectlFor(stack: StackInfo) {
  const kubectl = (...args: string[]) => kubectlRun(stack, args);
  return {
    kubectl,
    apply: (objects: object | object[]) =>
      kubectlRun(
        stack,
        ['apply', '-f', '-'],
        JSON.stringify(Array.isArray(objects) ? { apiVersion: 'v1', kind: 'List', items: objects } : objects),
      ),
    /** The object as JSON, or undefined when it does not exist. */
    get<T = any>(kind: string, namespace: string, name: string): T | undefined {
      try {
        return JSON.parse(kubectlRun(stack, ['-n', namespace, 'get', kind, name, '-o', 'json'])) as T;
      } catch (err) {
        if (String((err as { stderr?: string }).stderr ?? err).includes('NotFound')) return undefined;
        throw err;
      }
    },
    /** A MachineModel's status.phase, or undefined when it has none (or does not exist). */
    phaseOf(namespace: string, name: string): string | undefined {
      return this.get('machinemodel', namespace, name)?.status?.phase as string | undefined;
    },
    list<T = any>(kind: string, namespace: string, selector?: string): T[] {
      const args = ['-n', namespace, 'get', kind, '-o', 'json', ...(selector ? ['-l', selector] : [])];
      return (JSON.parse(kubectlRun(stack, args)) as { items: T[] }).items;
    },
    createNamespace(prefix: string): string {
      const ns = `${prefix}-${randomUUID().slice(0, 8)}`;
      kubectlRun(stack, ['create', 'namespace', ns]);
      return ns;
    },
    /** A namespace whose Pods run on the stack's real node (tools/local-stack/real-node.ts). */
    createRealNodeNamespace(prefix: string): string {
      const ns = this.createNamespace(prefix);
      kubectlRun(stack, ['annotate', 'namespace', ns, ...realNodeAnnotationArgs]);
      return ns;
    },
  };
}

/** A status condition of an object (as kubectl returns it), by type. */
export function conditionOf(
  obj: any,
  type: string,
): { type: string; status: string; reason: string; message: string } | undefined {
  return obj?.status?.conditions?.find((c: { type: string }) => c.type === type);
}

/** A model's phase and its Ready condition's reason and message, as a test waits on them. */
export function phaseAndReadyOf(mm: any): { phase?: string; reason?: string; message: string } {
  const ready = conditionOf(mm, 'Ready');
  return { phase: mm?.status?.phase as string | undefined, reason: ready?.reason, message: ready?.message ?? '' };
}

/** The stack's admin kubeconfig, with the apiserver reached on another local port (a proxy in front of it). */
export function kubeconfigThrough(stack: StackInfo, port: number): string {
  const config = YAML.parse(readFileSync(stack.kubeconfig, 'utf8')) as { clusters: { cluster: { server: string } }[] };
  for (const c of config.clusters) c.cluster.server = `https://127.0.0.1:${port}`;
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'mmo-proxied-')), 'kubeconfig');
  writeFileSync(file, YAML.stringify(config));
  return file;
}
