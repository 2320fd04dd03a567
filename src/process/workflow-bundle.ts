// What the worker bundles: the workflow code, and the modules that every workflow of the worker's
// one reusable V8 context shares instead of evaluating its own copy (the SDK's `preloadModules`).
// Without them each workflow, at its start and at every replay after it left the cache, evaluated
// the whole workflow code and `@temporalio/workflow` again and kept that copy while cached
// (docs/how-it-works.md, "One copy of the workflow code for all models").
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The source folders whose every module is shared. A shared module is evaluated once, before any
 * workflow exists, and the SDK freezes what it exports: it must hold no state of its own (no
 * module-level `let`, `var` or mutable collection; test/unit/shared-modules checks).
 */
const sharedSourceFolders = ['src/core', 'workflows'] as const;

export function sharedModuleFiles(): string[] {
  return sharedSourceFolders.flatMap((folder) =>
    readdirSync(path.join(root, folder))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => path.join(root, folder, f)),
  );
}

/** `bundleWorkflowCode`'s options, as the build, the worker run from source and the tests use them. */
export function workflowBundleOptions(): { workflowsPath: string; preloadModules: string[] } {
  return {
    workflowsPath: path.join(root, 'workflows/index.ts'),
    preloadModules: ['@temporalio/workflow', ...sharedModuleFiles()],
  };
}
