// The production-shaped Temporal of the local stack: PostgreSQL from Debian, its schema set up with
// Temporal's own temporal-sql-tool, and the Temporal server built from go.temporal.io/server running
// its frontend, history, matching and worker services in one process. The CLI's dev server (SQLite)
// stays the default; this is `stack up --temporal postgres` and the benchmark's `--temporal postgres`.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { ensureDebianPackages } from './debian-packages.js';
import { temporalServer } from './components.js';
import { ensureInstalled, PrerequisiteError } from './install.js';
import { freePort, portInUse, startProcess, waitUntil, type ManagedProcess } from './processes.js';
import { searchAttributes, temporalServing } from './temporal-dev-server.js';

/** Which Temporal the stack runs: the CLI's dev server on SQLite, or the server on PostgreSQL. */
export type TemporalKind = 'dev' | 'postgres';
export const temporalKinds: TemporalKind[] = ['dev', 'postgres'];

const dbUser = 'temporal';
const databases = { default: 'temporal', visibility: 'temporal_visibility' } as const;
/** Fixed when the cluster is created; 16 lets history work on a 2-core machine run in parallel. */
const historyShards = 16;

export interface PostgresTemporalOptions {
  /** The Temporal CLI: namespace, search attributes and health checks. */
  cliBinary: string;
  /** Holds the server's config; PostgreSQL's data lives in `postgresDataDir(stateDir)`. */
  stateDir: string;
  logDir: string;
  ports: { grpc: number; http: number; metrics: number };
  namespace: string;
  log: (line: string) => void;
}

/**
 * PostgreSQL refuses to run as root, so as root it runs as Debian's `postgres` user, whose data must
 * sit where that user can reach it (a state directory under /root cannot be entered).
 */
function postgresDataDir(stateDir: string): string {
  if (process.getuid?.() !== 0) return path.join(stateDir, 'postgres');
  const key = createHash('sha256').update(path.resolve(stateDir)).digest('hex').slice(0, 12);
  return path.join('/var/lib/postgresql/machinemodel-operator', key);
}

/** The account PostgreSQL runs as: ours, or `postgres` when we are root. */
function postgresAccount(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Debian's PostgreSQL programs (initdb, postgres), installed from Debian's packages when missing. */
function postgresBinDir(log: (line: string) => void): string {
  const root = '/usr/lib/postgresql';
  const newest = () =>
    existsSync(root)
      ? readdirSync(root)
          .filter((v) => existsSync(path.join(root, v, 'bin', 'postgres')))
          .sort((a, b) => Number(b) - Number(a))[0]
      : undefined;
  if (!newest()) ensureDebianPackages(['postgresql'], log);
  const version = newest();
  if (!version) throw new PrerequisiteError(`PostgreSQL is not installed under ${root}: apt-get install postgresql.`);
  return path.join(root, version, 'bin');
}

/**
 * Builds the server if it is not installed, starts PostgreSQL (creating its cluster on first use), sets
 * up Temporal's schema, then starts Temporal; resolves once it serves the namespace.
 */
export async function startPostgresTemporal(
  o: PostgresTemporalOptions,
  started: (p: ManagedProcess) => ManagedProcess,
): Promise<void> {
  const serverBinary = await ensureInstalled(temporalServer, o.log);
  // Built beside the server by the same component (see components.ts).
  const sqlToolBinary = path.join(path.dirname(serverBinary), 'sql');
  const bin = postgresBinDir(o.log);
  const account = postgresAccount();
  const dataDir = postgresDataDir(o.stateDir);
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    o.log(`creating a PostgreSQL cluster in ${dataDir}`);
    mkdirSync(path.dirname(dataDir), { recursive: true, mode: 0o755 });
    mkdirSync(dataDir, { mode: 0o700 });
    if (account) chownSync(dataDir, account.uid, account.gid);
    // Loopback only, trust: a local stack's database with no password to keep out of logs.
    const r = spawnSync(
      path.join(bin, 'initdb'),
      ['-D', dataDir, '-U', dbUser, '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-instructions'],
      { ...account, encoding: 'utf8', cwd: '/' },
    );
    if (r.status !== 0) throw new Error(`initdb failed: ${(r.stderr || r.stdout).trim().split('\n').pop()}`);
  }
  const postgresPort = await freePort();
  const postgres = started(
    startProcess(
      'postgres',
      path.join(bin, 'postgres'),
      [
        '-D',
        dataDir,
        '-p',
        String(postgresPort),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'max_connections=200',
        // Commits are not waited on the disk (a crash of the machine can lose the last moments, never
        // corrupt): the same bargain as the dev server's SQLite (synchronous=normal) and the stack's
        // etcd (--unsafe-no-fsync), so the benchmark compares like with like.
        '-c',
        'synchronous_commit=off',
      ],
      path.join(o.logDir, 'postgres.log'),
      undefined,
      account,
    ),
  );
  const sqlTool = (db: string, ...args: string[]) =>
    execFileSync(
      sqlToolBinary,
      ['--plugin', 'postgres12', '--ep', '127.0.0.1', '-p', String(postgresPort), '-u', dbUser, '--db', db, ...args],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
  await waitUntil(postgres, 'accepting connections', async () => connects(bin, postgresPort), 60_000);

  for (const [db, schema] of [
    [databases.default, 'postgresql/v12/temporal'],
    [databases.visibility, 'postgresql/v12/visibility'],
  ] as const) {
    if (!databaseExists(bin, postgresPort, db)) {
      o.log(`setting up Temporal's schema in database ${db} (temporal-sql-tool)`);
      sqlTool(db, 'create-database');
      sqlTool(db, 'setup-schema', '-v', '0.0');
    }
    // Brings an existing database up to this server's schema version (a no-op when it is there).
    sqlTool(db, 'update-schema', '--schema-name', schema);
  }

  const configFile = path.join(o.stateDir, 'temporal-server.yaml');
  const dynamicConfigFile = path.join(o.stateDir, 'temporal-dynamic-config.yaml');
  writeFileSync(dynamicConfigFile, '{}\n');
  writeFileSync(configFile, stringify(await serverConfig(o, postgresPort, dynamicConfigFile)));
  const temporal = started(
    startProcess(
      'temporal',
      serverBinary,
      ['--config-file', configFile, '--allow-no-auth', 'start'],
      path.join(o.logDir, 'temporal.log'),
    ),
  );
  const address = `127.0.0.1:${o.ports.grpc}`;
  await waitUntil(temporal, 'serving', () => temporalServing(o.cliBinary, address), 90_000);
  await ensureNamespace(o, address, temporal);
}

/** Deletes PostgreSQL's data of the stack in `stateDir` (the data may live outside it, see postgresDataDir). */
export function removePostgresData(stateDir: string): void {
  rmSync(postgresDataDir(stateDir), { recursive: true, force: true });
}

function psql(bin: string, port: number, sql: string): string {
  return execFileSync(
    path.join(bin, 'psql'),
    ['-h', '127.0.0.1', '-p', String(port), '-U', dbUser, '-d', 'postgres', '-tAc', sql],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  ).trim();
}

function connects(bin: string, port: number): boolean {
  try {
    return psql(bin, port, 'select 1') === '1';
  } catch {
    return false;
  }
}

function databaseExists(bin: string, port: number, db: string): boolean {
  return psql(bin, port, `select 1 from pg_database where datname = '${db}'`) === '1';
}

/** The server's configuration: the four services on loopback, PostgreSQL for history and visibility. */
async function serverConfig(o: PostgresTemporalOptions, postgresPort: number, dynamicConfigFile: string) {
  const store = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `127.0.0.1:${postgresPort}`,
      connectProtocol: 'tcp',
      user: dbUser,
      password: '',
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = async (grpcPort: number, extra: Record<string, unknown> = {}) => ({
    rpc: { grpcPort, membershipPort: await freeMembershipPort(), bindOnLocalHost: true, ...extra },
  });
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: historyShards,
      datastores: {
        'postgres-default': store(databases.default, 20),
        'postgres-visibility': store(databases.visibility, 10),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      metrics: {
        prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${o.ports.metrics}` },
      },
    },
    services: {
      frontend: await service(o.ports.grpc, { httpPort: o.ports.http }),
      history: await service(await freePort()),
      matching: await service(await freePort()),
      worker: await service(await freePort()),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `127.0.0.1:${o.ports.grpc}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: dynamicConfigFile, pollInterval: '60s' },
  };
}

/**
 * The SQL schema keeps a membership port in a smallint: below 32768, where the kernel hands out no
 * ephemeral ports. A random one that is free now, below those freePort hands out (24000 and up).
 */
async function freeMembershipPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 3_500);
    if (!(await portInUse(port))) return port;
  }
}

/**
 * The server starts with only its system namespace: create the operator's (3 days' retention, as the
 * dev server keeps) and its search attributes, then wait until the frontend serves both.
 */
async function ensureNamespace(o: PostgresTemporalOptions, address: string, temporal: ManagedProcess): Promise<void> {
  const cli = (...args: string[]) =>
    spawnSync(o.cliBinary, ['--address', address, ...args], { encoding: 'utf8', timeout: 30_000 });
  if (cli('operator', 'namespace', 'describe', '--namespace', o.namespace).status !== 0) {
    const r = cli('operator', 'namespace', 'create', '--namespace', o.namespace, '--retention', '72h');
    if (r.status !== 0) throw new Error(`creating namespace ${o.namespace} failed: ${r.stderr.trim()}`);
  }
  await waitUntil(
    temporal,
    `serving namespace ${o.namespace}`,
    async () => cli('operator', 'namespace', 'describe', '--namespace', o.namespace).status === 0,
    60_000,
  );
  const listed = (): string[] => {
    const r = cli('operator', 'search-attribute', 'list', '--namespace', o.namespace, '--output', 'json');
    if (r.status !== 0) return [];
    return Object.keys((JSON.parse(r.stdout) as { customAttributes?: object }).customAttributes ?? {});
  };
  for (const a of searchAttributes) {
    // Other services learn of a new namespace a little later: until then the create says it is not found.
    await waitUntil(
      temporal,
      `registering search attribute ${a.name}`,
      async () =>
        listed().includes(a.name) ||
        cli('operator', 'search-attribute', 'create', '--namespace', o.namespace, '--name', a.name, '--type', a.cliType)
          .status === 0,
      60_000,
    );
  }
  await waitUntil(
    temporal,
    'serving the search attributes',
    async () => searchAttributes.every((a) => listed().includes(a.name)),
    60_000,
  );
}
