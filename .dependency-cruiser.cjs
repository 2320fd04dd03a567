// The import rules of the layers (docs/contributing.md, "Layout"); `npm test` fails on any violation.
//   src/core        pure, workflow-safe decisions: imports nothing but itself
//   workflows       orchestration: src/core, @temporalio/workflow|common; activities only as types
//   activities      Kubernetes and gateway I/O: src/core, src/process
//   src/informer    watch -> filter -> gate -> signal: src/core, src/process, src/sharding, the workflows' contract
//   src/sharding    shard Leases, placement, scope, queue drains: src/core, src/process
//   src/temporal    starting, signalling and sweeping workflows through a client (the informer's side and
//                   mmctl): src/core, src/process, the workflows' contract, the informer's types
//   src/worker      this process's Temporal workers: src/core, src/process, activities, src/sharding's types
//   src/process     config, clients, logging, metrics: src/core
//   src/cli         mmctl's reads and output: src/core, src/process, the workflows' contract (no activities)
//   src/csi         the model cache's CSI node plugin (a DaemonSet): src/core, src/process
//   src/*.ts        entry points and the operator's composition root: anything above
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
      to: { path: '^(src/(informer|process|sharding|temporal|worker|cli|csi)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'activities-below-the-workflow',
      comment: 'activities do I/O for the workflow; they never reach up into it, the control plane or an entry point',
      severity: 'error',
      from: { path: '^activities/' },
      to: { path: '^(workflows/|src/(informer|sharding|temporal|worker|cli|csi)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'informer-does-not-reconcile',
      comment: 'the informer only signals: it never calls activities, nor runs workers or sends to Temporal itself',
      severity: 'error',
      from: { path: '^src/informer/' },
      to: { path: '^(activities/|src/(temporal|worker|cli|csi)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'sharding-below-the-control-plane',
      comment:
        'shard Leases, placement and drains are handed workers and an informer scope as functions: no workflows, activities, informer or Temporal client of their own',
      severity: 'error',
      from: { path: '^src/sharding/' },
      to: { path: '^(workflows/|activities/|src/(informer|temporal|worker|cli|csi)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'temporal-client-only',
      comment: 'what the informer and mmctl send to the workflows: no activities, workers, shards or mmctl output',
      severity: 'error',
      from: { path: '^src/temporal/' },
      to: { path: '^(activities/|src/(sharding|worker|cli|csi)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'temporal-sees-only-informer-types',
      comment: "the signal requests it delivers are the informer's: their type only, so mmctl loads no informer",
      severity: 'error',
      from: { path: '^src/temporal/' },
      to: { path: '^src/informer/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'worker-runs-activities-not-the-informer',
      comment: 'the workers run the workflows and activities; the informer, its client and mmctl are elsewhere',
      severity: 'error',
      from: { path: '^src/worker/' },
      to: { path: '^(workflows/|src/(informer|temporal|cli|csi)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'worker-sees-only-sharding-types',
      comment: 'a shard or drain asks the workers for a worker; the workers know nothing of Leases',
      severity: 'error',
      from: { path: '^src/worker/' },
      to: { path: '^src/sharding/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'cli-reads-workflows-only',
      comment: 'mmctl reads what the workflows record; it never runs activities or the informer',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^(activities/|src/(informer|sharding|temporal|worker)/|src/[^/]+\\.ts$)' },
    },
    {
      name: 'csi-plugin-stands-alone',
      comment: "the model cache's plugin runs on every node, privileged: no Temporal, no workflows, no informer",
      severity: 'error',
      from: { path: '^src/csi/' },
      to: {
        path: '^(workflows/|activities/|src/(informer|cli|sharding|temporal|worker)/|src/[^/]+\\.ts$|node_modules/@temporalio/)',
      },
    },
    {
      name: 'only-mmctl-uses-the-cli',
      severity: 'error',
      from: { path: '^(src/(core|process|informer|sharding|temporal|worker|csi)|workflows|activities)/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'process-below-the-product',
      severity: 'error',
      from: { path: '^src/process/' },
      to: { path: '^(workflows/|activities/|src/(informer|sharding|temporal|worker|cli|csi)/|src/[^/]+\\.ts$)' },
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
    // A worktree's node_modules may be a link to another checkout's: paths stay under node_modules/.
    preserveSymlinks: true,
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
