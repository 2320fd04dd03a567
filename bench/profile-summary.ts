// Where a V8 CPU profile's time went (bench:converge --profile writes them): self time summed by
// where the code lives (a package, the workflow bundle, Node's internals, V8's own work).
// Usage: npm run bench:profile -- <file.cpuprofile> [--top 15] [--last seconds]
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
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
  .option(
    '--last <seconds>',
    "only the profile's last seconds: the operator stops right after the namespace deletion, so its deleteSeconds",
    (v) => {
      const n = Number(v);
      if (!(n > 0)) throw new InvalidArgumentError(`a number of seconds > 0, got "${v}"`);
      return n;
    },
  )
  .parse();
const profile = JSON.parse(readFileSync(cmd.args[0]!, 'utf8')) as Profile;
const { top, last } = cmd.opts<{ top: number; last?: number }>();
const from = last === undefined ? -Infinity : profile.endTime - last * 1e6;

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
const parentOf = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
/** The innermost frame of the operator's own code on a sample's stack: which of its functions the time was spent for. */
function operatorFrameOf(id: number): string {
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const { url, functionName } = byId.get(at)!.callFrame;
    const place = placeOf(url, functionName);
    if (place.startsWith('operator: ')) return `${functionName || '(anonymous)'} ${place}`;
  }
  return '(no operator frame)';
}
const places = new Map<string, number>();
const functions = new Map<string, number>();
const forOperatorFrames = new Map<string, number>();
let total = 0;
let at = profile.startTime;
profile.samples.forEach((id, i) => {
  const us = profile.timeDeltas[i] ?? 0;
  at += us;
  if (at < from) return;
  const frame = byId.get(id)!.callFrame;
  total += us;
  const place = placeOf(frame.url, frame.functionName);
  places.set(place, (places.get(place) ?? 0) + us);
  const fn = `${frame.functionName || '(anonymous)'} ${place}`;
  functions.set(fn, (functions.get(fn) ?? 0) + us);
  if (place === '(idle)') return;
  const own = operatorFrameOf(id);
  forOperatorFrames.set(own, (forOperatorFrames.get(own) ?? 0) + us);
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
console.log(`\ntop ${top} of the operator's functions by the time spent below them (the innermost on each stack):`);
for (const [f, us] of [...forOperatorFrames].sort(([, a], [, b]) => b - a).slice(0, top)) console.log(line(f, us));
