// Where the operator's idle memory goes: the resident set of one process after each step the
// operator also takes (import the SDK and the Kubernetes client, connect, create the worker, poll),
// with the Deployment's heap flags. Needs a Temporal server and the built bundle (npm run build).
// Usage: NODE_OPTIONS="--max-semi-space-size=2 --max-old-space-size=384" node bench/idle-rss-steps.mjs <temporal host:port>
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
const rss = () => Math.round(Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024);
const log = (what) => console.log(`${String(rss()).padStart(4)} MiB  ${what}`);
log('node');
const { NativeConnection, Worker, Runtime, DefaultLogger } = await import('@temporalio/worker');
log('imported @temporalio/worker');
const { Connection, Client } = await import('@temporalio/client');
log('imported @temporalio/client');
const k8s = await import('@kubernetes/client-node');
void k8s;
log('imported @kubernetes/client-node');
Runtime.install({ logger: new DefaultLogger('WARN') });
const connection = await NativeConnection.connect({ address: process.argv[2] });
const client = new Client({ connection: await Connection.connect({ address: process.argv[2] }) });
void client;
log('runtime, native and client connections');
const worker = await Worker.create({
  connection,
  taskQueue: 'probe',
  workflowBundle: { codePath: 'dist/workflow-bundle.js' },
  activities: {},
});
log('Worker.create (workflow thread, bundle)');
const running = worker.run();
await sleep(15000);
global.gc?.();
log('polling 15 s');
worker.shutdown();
await running;
