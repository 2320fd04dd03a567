// Where a V8 CPU profile's time went (bench:converge --profile writes them): self time summed by
// where the code lives (a package, the workflow bundle, Node's internals, V8's own work).
// Usage: npm run bench:profile -- <file.cpuprofile> [--top 15]
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const cmd = new Command('bench:profile')
  .argument('<profile>', 'a .cpuprofile file')
  .option(
    '--top <n>',
    'functions listed',
    (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`a whole number >= 1, got "${v}"`);
      return n;
    },
    15,
  )
  .parse();
const profile = JSON.parse(readFileSync(cmd.args[0]!, 'utf8')) as Profile;
const top = cmd.opts<{ top: number }>().top;

/** Where a frame's code lives. */
function placeOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native or V8 builtins)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node internals';
  // The workflow bundle runs in a vm context; its code has no file URL of a package.
  if (/workflow|bundle/i.test(url)) return 'workflow bundle (vm)';
  return `operator: ${url.replace(/^.*\/dist\//, 'dist/')}`;
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const places = new Map<string, number>();
const functions = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const us = profile.timeDeltas[i] ?? 0;
  const frame = byId.get(id)!.callFrame;
  total += us;
  const place = placeOf(frame.url, frame.functionName);
  places.set(place, (places.get(place) ?? 0) + us);
  const fn = `${frame.functionName || '(anonymous)'} ${place}`;
  functions.set(fn, (functions.get(fn) ?? 0) + us);
});

const busy = total - (places.get('(idle)') ?? 0);
const line = (name: string, us: number) =>
  `${(us / 1e6).toFixed(1).padStart(8)} s ${((100 * us) / busy).toFixed(1).padStart(5)} %  ${name}`;
console.log(`profiled ${(total / 1e6).toFixed(1)} s, busy ${(busy / 1e6).toFixed(1)} s (shares of busy time)\n`);
console.log('by place:');
for (const [p, us] of [...places].filter(([p]) => p !== '(idle)').sort(([, a], [, b]) => b - a))
  console.log(line(p, us));
console.log(`\ntop ${top} functions by self time:`);
for (const [f, us] of [...functions]
  .filter(([f]) => !f.startsWith('(idle)'))
  .sort(([, a], [, b]) => b - a)
  .slice(0, top))
  console.log(line(f, us));
