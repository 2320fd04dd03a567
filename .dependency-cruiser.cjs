// The import rules of the layers (docs/contributing.md, "Layout"); `npm test` fails on any violation.
//   src/core        pure, workflow-safe decisions: imports nothing but itself
//   workflows       orchestration: src/core, @temporalio/workflow|common; activities only as types
//   activities      Kubernetes and gateway I/O: src/core, src/process
//   src/informer    watch -> filter -> signal: src/core, src/process, the workflows' contract
//   src/process     config, clients, logging, metrics: src/core
//   src/cli         mmctl's reads and output: src/core, src/process, the workflows' contract (no activities)
//   src/csi         the model cache's CSI node plugin (a DaemonSet): src/core, src/process
//   src/*.ts        entry points: anything above
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'core-is-pure',
      comment: 'src/core is imported by workflow code: no Node built-ins, no packages, no other layer',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { pathNot: '^src/core/' },
    },
    {
      name: 'workflows-are-deterministic',
      comment: 'workflow code runs in the sandbox: no Node built-ins, clients, loggers or I/O (types excepted)',
      severity: 'error',
      from: { path: '^workflows/' },
      to: {
        pathNot: ['^workflows/', '^src/core/', '^node_modules/@temporalio/(workflow|common)/'],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'workflows-see-only-activity-types',
      severity: 'error',
      from: { path: '^workflows/' },
      to: { path: '^(src/(informer|process)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'activities-below-the-workflow',
      comment: 'activities do I/O for the workflow; they never reach up into it, the informer or an entry point',
      severity: 'error',
      from: { path: '^activities/' },
      to: { path: '^(workflows/|src/informer/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'informer-does-not-reconcile',
      comment: 'the informer only signals: it never calls activities',
      severity: 'error',
      from: { path: '^src/informer/' },
      to: { path: '^(activities/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'cli-reads-workflows-only',
      comment: 'mmctl reads what the workflows record; it never runs activities or the informer',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^(activities/|src/informer/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'csi-plugin-stands-alone',
      comment: "the model cache's plugin runs on every node, privileged: no Temporal, no workflows, no informer",
      severity: 'error',
      from: { path: '^src/csi/' },
      to: { path: '^(workflows/|activities/|src/(informer|cli)/|src/[^/]+\\.ts$|node_modules/@temporalio/)' },
    },
    {
      name: 'only-mmctl-uses-the-cli',
      severity: 'error',
      from: { path: '^(src/(core|process|informer|csi)|workflows|activities)/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'process-below-the-product',
      severity: 'error',
      from: { path: '^src/process/' },
      to: { path: '^(workflows/|activities/|src/informer/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'product-never-imports-tests-or-tools',
      severity: 'error',
      from: { path: '^(src|workflows|activities)/' },
      to: { path: '^(test|bench|deploy|tools)/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: { path: '^(src|workflows|activities)/' },
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
