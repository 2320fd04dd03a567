// Bundles the compiled operator entry (dist/src/main.js, in place) with its Kubernetes client (npm
// run build, after tsc). Loaded as its hundreds of modules, @kubernetes/client-node 2.0.1 costs 87–92
// MiB of RSS at import; bundled and minified (whitespace and syntax only, so stack traces keep their
// names) 44–46 MiB. The other dependencies stay external: Temporal's packages load native code and
// worker-thread files by path. The entry keeps its path, so what it finds beside itself (the
// workflow bundle) it still finds.
import { readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../../', import.meta.url));
const entry = `${root}dist/src/main.js`;
const bundled = new Set(['@kubernetes/client-node']);
const { dependencies } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  dependencies: Record<string, string>;
};
const external = Object.keys(dependencies)
  .filter((d) => !bundled.has(d))
  .flatMap((d) => [d, `${d}/*`]);

await build({
  entryPoints: [entry],
  outfile: entry,
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  minifyWhitespace: true,
  minifySyntax: true,
  external,
  // Bundled CommonJS modules call require(), which an ES module does not have.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
console.error(`operator bundle: ${entry} (${Math.round(statSync(entry).size / 1024)} KiB)`);
