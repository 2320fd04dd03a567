// What an update of a child changes, in the words a person looks for: "image x:v1 → x:v2". Pure.
import { sameValue } from './desired-state.js';

type Obj = Record<string, any> | undefined;

interface Field {
  label: string;
  read(o: Obj): unknown;
}

const container = (o: Obj) => o?.spec?.template?.spec?.containers?.[0];

const fields: Record<string, Field[]> = {
  Deployment: [
    { label: 'image', read: (o) => container(o)?.image },
    { label: 'replicas', read: (o) => o?.spec?.replicas },
    { label: 'cpu', read: (o) => container(o)?.resources?.limits?.cpu },
    { label: 'memory', read: (o) => container(o)?.resources?.limits?.memory },
  ],
  Service: [{ label: 'port', read: (o) => o?.spec?.ports?.[0]?.port }],
  HorizontalPodAutoscaler: [
    { label: 'bounds', read: (o) => (o?.spec ? `${o.spec.minReplicas}–${o.spec.maxReplicas}` : undefined) },
  ],
};

/** "image a → b, replicas 2 → 3" for the fields a person cares about that differ; empty when none does. */
export function changedFields(kind: string, live: Obj, desired: Obj): string {
  return (fields[kind] ?? [])
    .flatMap(({ label, read }) => {
      const before = read(live);
      const after = read(desired);
      // The same test as the decision to write: a quantity the apiserver rewrote is no change.
      if (after === undefined || sameValue(after, before)) return [];
      return [`${label} ${before ?? '-'} → ${after}`];
    })
    .join(', ');
}
