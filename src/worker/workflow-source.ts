// Where the worker finds the workflow code.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { workflowBundleOptions } from '../process/workflow-bundle.js';

type WorkflowSource =
  { workflowBundle: { codePath: string } } | { workflowsPath: string; bundlerOptions: { preloadModules: string[] } };

/**
 * `entry` is the URL of the entry module that runs the operator (src/operator.ts): the operator is
 * bundled into one file (deploy/build/operator-bundle.ts), so the bundle's place is the entry's.
 * Compiled (dist/src/, as the image runs it): the workflow bundle that `npm run build` wrote beside
 * it. From source (tsx, as `npm start` runs it): the workflow code, bundled at start.
 */
export function workflowSource(entry: string): WorkflowSource {
  if (entry.endsWith('.ts')) {
    const { workflowsPath, preloadModules } = workflowBundleOptions();
    return { workflowsPath, bundlerOptions: { preloadModules } };
  }
  const codePath = fileURLToPath(new URL('../workflow-bundle.js', entry));
  if (!existsSync(codePath)) throw new Error(`the workflow bundle ${codePath} is missing: run npm run build`);
  return { workflowBundle: { codePath } };
}
