// The patch policy (docs/workflow-versioning.md) as a pure check: a patch is `patched` in the release
// that adds it (never one later than package.json's version), `deprecated` in the next one, and the
// release after that must ship without it.
import semver from 'semver';
import type { PatchRecord } from '../../workflows/patches.js';

/** The releases CHANGELOG.md names, from its "## [x.y.z]" headings. */
export function releasesIn(changelog: string): string[] {
  return [...changelog.matchAll(/^## \[(\d+\.\d+\.\d+)\]/gm)].map((m) => m[1]!);
}

/**
 * The patches that outlived their time, each with the reason. `current` is package.json's version: the
 * release being prepared (or the last one, when nothing changed since).
 */
export function overduePatches(patches: Record<string, PatchRecord>, releases: string[], current: string): string[] {
  const known = [...new Set([...releases, current])];
  return Object.entries(patches).flatMap(([id, patch]) => {
    if (!semver.valid(patch.addedIn)) return [`${id}: addedIn "${patch.addedIn}" is not a release version`];
    if (semver.gt(patch.addedIn, current))
      return [`${id}: added in ${patch.addedIn}, later than package.json's ${current} (set the release it ships in)`];
    const later = known.filter((v) => semver.gt(v, patch.addedIn)).sort(semver.compare);
    if (later.length >= 2)
      return [`${id}: added in ${patch.addedIn}, must be gone by ${later[1]} (${patch.stage} still)`];
    if (later.length === 1 && patch.stage === 'patched')
      return [
        `${id}: added in ${patch.addedIn}, must be deprecated in ${later[0]} (deprecatePatch, the old path deleted)`,
      ];
    return [];
  });
}
