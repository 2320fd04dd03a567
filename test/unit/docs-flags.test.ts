// The docs' tables of flags against the code that defines them: the operator's (docs/usage.md, "The
// operator process", against src/process/config.ts) and the model cache plugin's (docs/installing.md,
// against src/csi-plugin.ts). Every flag is in its table, with its environment variable, its default
// and its choices; a default the install overrides says so, and says the install's value.
import { Command, type Option } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { operatorEnvironment, parseOperatorConfig } from '../../src/process/config.js';
import { codeSpans, readRepoFile, tableRows } from '../support/doc-tables.js';

/** The operator's options, as parseOperatorConfig builds them (the command itself is not exported). */
function operatorOptions(): readonly Option[] {
  const parse = vi.spyOn(Command.prototype, 'parse').mockImplementation(function (this: Command) {
    throw Object.assign(new Error('caught'), { command: this });
  });
  try {
    parseOperatorConfig([]);
  } catch (err) {
    const command = (err as { command?: Command }).command;
    if (command) return command.options;
    throw err;
  } finally {
    parse.mockRestore();
  }
  throw new Error('parseOperatorConfig parsed nothing');
}

/** `--a/-b/-c` names `--a`, `--a-b`... after the first flag's prefix: `--temporal-tls-ca/-cert`. */
function flagsOf(cell: string): string[] {
  return codeSpans(cell).flatMap((span) => {
    const [first, ...more] = span.split('/');
    const stem = first!.slice(0, first!.lastIndexOf('-'));
    return [first!, ...more.map((m) => `${stem}${m}`)];
  });
}

/** The value a default cell states: parentheses, backticks and the install's value left out. */
function stated(cell: string): string {
  return cell
    .replace(/\s*\([^)]*\)/g, '')
    .replace(/`/g, '')
    .trim();
}

/** The env entries of the operator's Deployment in the installs. */
function installEnv(): Map<string, string> {
  const manifest = readRepoFile('deploy/operator/deployment.yaml');
  return new Map(
    [...manifest.matchAll(/- \{ name: (\w+), value: '?([^'}]*?)'? \}/g)].map((m) => [m[1]!, m[2]!.trim()]),
  );
}

describe("docs/usage.md's table of the operator's flags", () => {
  const options = operatorOptions();
  const rows = tableRows('docs/usage.md', '## The operator process', 'flag').map((r) => {
    const [flag, env, defaults, what] = Object.values(r);
    return { flags: flagsOf(flag!), env: codeSpans(env!), defaults: defaults!.split(' / '), what: what! };
  });
  const documented = new Map(
    rows.flatMap((row) =>
      row.flags.map((flag, i) => [flag, { ...row, default: row.defaults[row.defaults.length > 1 ? i : 0]! }] as const),
    ),
  );

  it('has every flag of the operator, and no other', () => {
    expect([...documented.keys()].sort()).toEqual(options.map((o) => o.long).sort());
  });

  it("names each flag's environment variable, and every variable the operator reads", () => {
    const matches = (pattern: string, name: string) => new RegExp(`^${pattern.replace(/\*/g, '[A-Z_]+')}$`).test(name);
    for (const o of options)
      expect(
        documented.get(o.long!)?.env.some((e) => matches(e, o.envVar!)),
        `${o.long}: ${o.envVar}`,
      ).toBe(true);
    const named = rows.flatMap((r) => r.env);
    const unnamed = operatorEnvironment().filter((v) => v !== 'NODE_OPTIONS' && !named.some((e) => matches(e, v)));
    expect(unnamed).toEqual([]);
  });

  it.each(options.map((o) => [o.long!, o] as const))('%s: its default', (flag, o) => {
    const cell = documented.get(flag)?.default ?? '';
    const value = o.defaultValue as unknown;
    const off = value === undefined || value === false || value === 0;
    if (flag === '--identity') return expect(cell).toMatch(/random/);
    if (stated(cell) === String(value) || (stated(cell) === 'off' && off) || codeSpans(cell).includes(String(value)))
      return;
    if (value === '') return expect(stated(cell)).toBe('all');
    // Computed at start (the SDK's size, a URL from other flags): the cell says how, not a number.
    expect(value, `${flag}: "${cell}"`).toBeUndefined();
    expect(stated(cell)).not.toMatch(/^\d/);
  });

  it('says what the install sets where it differs', () => {
    const env = installEnv();
    for (const o of options) {
      const cell = documented.get(o.long!)?.default ?? '';
      const install = /\(the install: ([^)]+)\)/.exec(cell)?.[1];
      if (install) expect(env.get(o.envVar!), o.long).toBe(install);
    }
    expect(env.get('MMO_SHARDS')).toBeDefined();
  });

  it("names each flag's choices", () => {
    for (const o of options.filter((o) => o.argChoices)) {
      const row = documented.get(o.long!)!;
      const said = codeSpans(`${row.default} ${row.what}`);
      expect(
        o.argChoices!.filter((c) => !said.includes(c)),
        o.long,
      ).toEqual([]);
    }
  });
});

describe("docs/installing.md's table of the model cache plugin's flags", () => {
  const source = readRepoFile('src/csi-plugin.ts');
  const declared = new Map(
    [...source.matchAll(/\.option\(\s*'(--[\w-]+)[^']*',\s*(?:'[^']*'|"[^"]*")(?:,\s*'([^']*)')?/g)].map((m) => [
      m[1]!,
      m[2],
    ]),
  );
  const rows = new Map(
    tableRows('docs/installing.md', "The plugin's flags", 'flag').map((r) => [codeSpans(r.flag!)[0]!, r.default!]),
  );

  it('has every flag the plugin declares, and no other', () => {
    expect(declared.size).toBeGreaterThan(0);
    expect([...rows.keys()].sort()).toEqual([...declared.keys()].sort());
  });

  it('states the literal defaults', () => {
    for (const [flag, value] of declared) if (value !== undefined) expect(stated(rows.get(flag)!), flag).toBe(value);
  });
});
