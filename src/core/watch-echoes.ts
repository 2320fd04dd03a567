// Which watch events a round caused itself. A round's steps return "Kind/resourceVersion" of every
// object they wrote; a signal whose events are all among them is that round's echo and needs no round.

/** What of a signal's hint names the events it stands for. */
export interface VersionedHint {
  source: string;
  resourceVersion?: string;
  /** "Kind/resourceVersion" of each event of a coalesced signal; absent when one of them had none. */
  versions?: string[];
}

/** "Kind/resourceVersion" of each watch event the hint stands for; undefined when one is unknown. */
export function versionsOf(hint: VersionedHint): string[] | undefined {
  if (hint.versions) return hint.versions;
  return hint.resourceVersion !== undefined ? [`${hint.source}/${hint.resourceVersion}`] : undefined;
}

/** Whether every event the hint stands for is one of `written`. */
export function isEchoOf(written: readonly string[], hint: VersionedHint): boolean {
  const versions = versionsOf(hint);
  return versions !== undefined && versions.length > 0 && versions.every((v) => written.includes(v));
}

/** The versions of two coalesced hints: both lists, or undefined when either is unknown. */
export function mergedVersions(a: VersionedHint, b: VersionedHint): string[] | undefined {
  const left = versionsOf(a);
  const right = versionsOf(b);
  return left && right ? [...new Set([...left, ...right])] : undefined;
}
