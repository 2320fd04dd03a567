// Prometheus metrics of the operator process (the informer side; reconcile history lives in Temporal).
import http from 'node:http';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReadyGate } from './ready-gate.js';

/** What the informer and the signaler count; each scrape reads them (they may start after the endpoint). */
export interface MetricSources {
  informer?: {
    events: number;
    restarts: number;
    ignoredInTerminatingNamespaces: number;
    cachedObjects: Map<string, number>;
  };
  signaler?: { sent: number; failures: number; pendingCount: number };
  startGate?: { started: number; expired: number; waitingCount: number; startingCount: number };
  /** Deletions of models whose namespace is being deleted (src/informer/deletion-lane.ts). */
  deletions?: { released: number; heldCount: number };
  /** The worker's Kubernetes reads, by where they were served from. */
  reads?: { cache: number; apiserver: number };
  /** With --shards: the Leases held and taken, the placements applied. */
  shards?: { leases: { owned: number[]; taken: number }; serverSide?: boolean };
}

export function createMetrics(sources: MetricSources): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'machinemodel_operator_' });
  for (const add of [informerMetrics, signalerMetrics, readMetrics, startGateMetrics, deletionMetrics, shardMetrics])
    add(registry, sources);
  return registry;
}

// The informer and the others keep plain counts; each scrape reads them.
function counter(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

function gauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

function informerMetrics(registry: Registry, sources: MetricSources): void {
  counter(
    registry,
    'machinemodel_operator_watch_events_total',
    'Watch events received for MachineModels and their children',
    () => sources.informer?.events ?? 0,
  );
  counter(
    registry,
    'machinemodel_operator_watch_terminating_namespace_events_total',
    "Children's watch events in namespaces being deleted, which wake no workflow",
    () => sources.informer?.ignoredInTerminatingNamespaces ?? 0,
  );
  counter(
    registry,
    'machinemodel_operator_watch_restarts_total',
    'List/watch restarts after an error or a watch presumed dead',
    () => sources.informer?.restarts ?? 0,
  );
  new Gauge({
    name: 'machinemodel_operator_informer_cached_objects',
    help: "Objects in the informer's caches, by kind (with --shards: its shards' namespaces only)",
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of sources.informer?.cachedObjects ?? []) this.set({ kind }, n);
    },
  });
}

function signalerMetrics(registry: Registry, sources: MetricSources): void {
  counter(
    registry,
    'machinemodel_operator_signals_sent_total',
    'Signals delivered to MachineModel workflows',
    () => sources.signaler?.sent ?? 0,
  );
  counter(
    registry,
    'machinemodel_operator_signal_failures_total',
    'Failed attempts to deliver a signal (retried)',
    () => sources.signaler?.failures ?? 0,
  );
  gauge(
    registry,
    'machinemodel_operator_signals_pending',
    'Models with a signal waiting for delivery',
    () => sources.signaler?.pendingCount ?? 0,
  );
}

function readMetrics(registry: Registry, sources: MetricSources): void {
  new Counter({
    name: 'machinemodel_operator_kube_reads_total',
    help: "The worker's Kubernetes reads, by source: the informer's cache or the apiserver",
    labelNames: ['source'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ source: 'cache' }, sources.reads?.cache ?? 0);
      this.inc({ source: 'apiserver' }, sources.reads?.apiserver ?? 0);
    },
  });
}

function startGateMetrics(registry: Registry, sources: MetricSources): void {
  counter(
    registry,
    'machinemodel_operator_models_started_total',
    "New models let through the start gate (their workflows' first signal sent)",
    () => sources.startGate?.started ?? 0,
  );
  counter(
    registry,
    'machinemodel_operator_models_start_expired_total',
    'Started models that freed their place in the start gate at its hold limit, not Ready or stalled by then',
    () => sources.startGate?.expired ?? 0,
  );
  gauge(
    registry,
    'machinemodel_operator_models_waiting_to_start',
    'New models waiting in the start gate for their turn',
    () => sources.startGate?.waitingCount ?? 0,
  );
  gauge(
    registry,
    'machinemodel_operator_models_starting',
    'Models let through the start gate that are not yet Ready or stalled',
    () => sources.startGate?.startingCount ?? 0,
  );
}

function deletionMetrics(registry: Registry, sources: MetricSources): void {
  gauge(
    registry,
    'machinemodel_operator_deletions_held',
    'Models deleted with their namespace, whose workflows are told once no namespace deletion with models is under way',
    () => sources.deletions?.heldCount ?? 0,
  );
  counter(
    registry,
    'machinemodel_operator_deletions_released_total',
    'Held deletions told to their workflows: no namespace deletion under way, a shard lost, or the hold limit',
    () => sources.deletions?.released ?? 0,
  );
}

function shardMetrics(registry: Registry, sources: MetricSources): void {
  gauge(
    registry,
    'machinemodel_operator_shards_server_side',
    'With --shards: 1 when the apiserver sends only the shards asked for (ShardedListAndWatch), 0 when the informer filters alone',
    () => (sources.shards?.serverSide ? 1 : 0),
  );
  gauge(
    registry,
    'machinemodel_operator_shards_held',
    "Shards whose Leases this replica holds (with --shards): it watches and runs their namespaces' models",
    () => sources.shards?.leases.owned.length ?? 0,
  );
  counter(
    registry,
    'machinemodel_operator_shards_taken_total',
    'Shard Leases this replica took (at start, or from a replica that left)',
    () => sources.shards?.leases.taken ?? 0,
  );
}

/**
 * Serves /metrics, /healthz (the process's event loop answers: a wedged process is restarted) and
 * /readyz (200 only when nothing is waited for, else 503 with the reasons) on the given port
 * (loopback unless told otherwise).
 */
export function serveEndpoints(registry: Registry, gate: ReadyGate, port: number, host: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics') {
      registry.metrics().then(
        (body) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(body),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    } else if (req.url === '/healthz') {
      res.writeHead(200).end('ok\n');
    } else if (req.url === '/readyz') {
      const reasons = gate.reasons;
      if (reasons.length) res.writeHead(503).end(`not ready:\n${reasons.map((r) => `- ${r}\n`).join('')}`);
      else res.writeHead(200).end('ok\n');
    } else {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
