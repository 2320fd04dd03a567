// Resource versions are comparable between objects of one resource since Kubernetes 1.35 (KEP-5504):
// positive decimal integers without leading zeros, larger is newer. Pure.

/** -1, 0 or 1 as `a` is older than, the same as or newer than `b`; undefined when either is not comparable. */
export function compareResourceVersions(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  const wellFormed = /^[1-9][0-9]*$/;
  if (!a || !b || !wellFormed.test(a) || !wellFormed.test(b)) return undefined;
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}

/** The smallest resource version newer than `rv`; undefined when `rv` is not comparable. */
export function newerThan(rv: string | undefined): string | undefined {
  return compareResourceVersions(rv, rv) === 0 ? String(BigInt(rv!) + 1n) : undefined;
}
