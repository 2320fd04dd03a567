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
function moduleLevelState(source: string): string[] {
  const file = ts.createSourceFile('m.ts', source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    for (const d of list.declarations) {
      const name = d.name.getText(file);
      const declared = d.type?.getText(file) ?? '';
      let value = d.initializer;
      let readOnly = /^(readonly |Readonly)/.test(declared);
      // `[...] as const` is read-only; any other assertion says nothing about it.
      if (value && ts.isAsExpression(value)) {
        readOnly ||= value.type.getText(file) === 'const';
        value = value.expression;
      }
      if (!(list.flags & ts.NodeFlags.Const)) found.push(`${name}: declared with let or var`);
      else if (value && ts.isNewExpression(value) && collections.test(value.expression.getText(file)) && !readOnly) {
        found.push(`${name}: a mutable ${value.expression.getText(file)}`);
      } else if (value && ts.isArrayLiteralExpression(value) && !readOnly) found.push(`${name}: a mutable array`);
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
    expect(moduleLevelState('let names = ["a"] as const;')).toEqual(['names: declared with let or var']);
    expect(moduleLevelState('const seen = new Map<string, number>();')).toEqual(['seen: a mutable Map']);
    expect(moduleLevelState('const steps = [];')).toEqual(['steps: a mutable array']);
    expect(moduleLevelState('const known: ReadonlySet<string> = new Set(["a"]);')).toEqual([]);
    expect(moduleLevelState('const names = ["a", "b"] as const;')).toEqual([]);
    expect(moduleLevelState('const names = [] as string[];')).toEqual(['names: a mutable array']);
    expect(moduleLevelState('function f() { let local = 0; return local; }')).toEqual([]);
  });

  it.each(sharedModuleFiles().map((f) => [path.relative(process.cwd(), f), f]))('%s keeps no state', (_, file) => {
    expect(moduleLevelState(readFileSync(file, 'utf8'))).toEqual([]);
  });
});
