// What an update of a child changes, in the words a person looks for: "image x:v1 → x:v2". Pure.
import { parseQuantity } from './validation.js';

type Obj = Record<string, any> | undefined;

interface Field {
  label: string;
  read(o: Obj): unknown;
  /** Two values that read differently but mean the same (quantities the apiserver rewrote). */
  same?(a: unknown, b: unknown): boolean;
}

const container = (o: Obj) => o?.spec?.template?.spec?.containers?.[0];
const sameQuantity = (a: unknown, b: unknown) =>
  a === b || (typeof a === 'string' && typeof b === 'string' && parseQuantity(a) === parseQuantity(b));

const fields: Record<string, Field[]> = {
  Deployment: [
    { label: 'image', read: (o) => container(o)?.image },
    { label: 'replicas', read: (o) => o?.spec?.replicas },
    { label: 'cpu', read: (o) => container(o)?.resources?.limits?.cpu, same: sameQuantity },
    { label: 'memory', read: (o) => container(o)?.resources?.limits?.memory, same: sameQuantity },
  ],
  Service: [{ label: 'port', read: (o) => o?.spec?.ports?.[0]?.port }],
  HorizontalPodAutoscaler: [
    { label: 'bounds', read: (o) => (o?.spec ? `${o.spec.minReplicas}–${o.spec.maxReplicas}` : undefined) },
  ],
};

/** "image a → b, replicas 2 → 3" for the fields a person cares about that differ; empty when none does. */
export function changedFields(kind: string, live: Obj, desired: Obj): string {
  return (fields[kind] ?? [])
    .flatMap(({ label, read, same }) => {
      const before = read(live);
      const after = read(desired);
      if (after === undefined || (same ? same(before, after) : before === after)) return [];
      return [`${label} ${before ?? '-'} → ${after}`];
    })
    .join(', ');
}
