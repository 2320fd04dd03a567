// Every workflow of the worker shares one evaluation of these modules (src/process/workflow-bundle.ts),
// so state kept at module level would leak from one model's workflow into another's, and replays
// would see what other workflows left behind. The rule, read from the source: at module level no
// `let` or `var`, and a collection only as a read-only type.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { sharedModuleFiles, workflowBundleOptions } from '../../src/process/workflow-bundle.js';

const collections = /^(Map|Set|WeakMap|WeakSet|WeakRef|Array)$/;

/** What a module keeps at its top level that another workflow could see changed. */
export function moduleLevelState(source: string): string[] {
  const file = ts.createSourceFile('m.ts', source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    for (const d of list.declarations) {
      const name = d.name.getText(file);
      if (!(list.flags & ts.NodeFlags.Const)) found.push(`${name}: declared with let or var`);
      else if (d.initializer && ts.isNewExpression(d.initializer)) {
        const made = d.initializer.expression.getText(file);
        const declared = d.type?.getText(file) ?? '';
        if (collections.test(made) && !/^Readonly/.test(declared)) found.push(`${name}: a mutable ${made}`);
      } else if (
        d.initializer &&
        ts.isArrayLiteralExpression(d.initializer) &&
        !/^(readonly |Readonly)/.test(d.type?.getText(file) ?? '') &&
        !/as const$/.test(d.initializer.parent.getText(file))
      ) {
        found.push(`${name}: a mutable array`);
      }
    }
  }
  return found;
}

describe('modules every workflow shares', () => {
  it('shares the workflow code, the pure decisions and the SDK', () => {
    const files = sharedModuleFiles().map((f) => path.relative(process.cwd(), f));
    expect(files).toContain('workflows/machine-model.ts');
    expect(files).toContain('src/core/desired-state.ts');
    expect(workflowBundleOptions().preloadModules).toContain('@temporalio/workflow');
  });

  it('finds state kept at module level', () => {
    expect(moduleLevelState('let count = 0;')).toEqual(['count: declared with let or var']);
    expect(moduleLevelState('const seen = new Map<string, number>();')).toEqual(['seen: a mutable Map']);
    expect(moduleLevelState('const steps = [];')).toEqual(['steps: a mutable array']);
    expect(moduleLevelState('const known: ReadonlySet<string> = new Set(["a"]);')).toEqual([]);
    expect(moduleLevelState('const names = ["a", "b"] as const;')).toEqual([]);
    expect(moduleLevelState('function f() { let local = 0; return local; }')).toEqual([]);
  });

  it.each(sharedModuleFiles().map((f) => [path.relative(process.cwd(), f), f]))('%s keeps no state', (_, file) => {
    expect(moduleLevelState(readFileSync(file, 'utf8'))).toEqual([]);
  });
});
