// The Temporal CLI's dev server, as the local stack runs it: one process, SQLite in a file, the
// operator's search attributes registered. Also started on its own by tests that restart Temporal.
import { execFileSync } from 'node:child_process';
import type { SearchAttributeType } from '@temporalio/common';
import { operatorSearchAttributes } from '../../workflows/search-attributes.js';
import { startProcess, type ManagedProcess } from './processes.js';

const cliTypes: Record<SearchAttributeType, string> = {
  TEXT: 'Text',
  KEYWORD: 'Keyword',
  INT: 'Int',
  DOUBLE: 'Double',
  BOOL: 'Bool',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};

/** The operator's search attributes as the Temporal CLI names them (`--search-attribute Name=Type`). */
export const searchAttributes = operatorSearchAttributes.map((key) => ({
  name: key.name,
  cliType: cliTypes[key.type],
}));

export interface DevServerOptions {
  /** The Temporal CLI. */
  binary: string;
  ports: { grpc: number; http: number; metrics: number; ui: number };
  /** Its SQLite database: a server started again on the same file finds everything it had. */
  dbFile: string;
  namespace: string;
  logFile: string;
}

export function startTemporalDevServer(o: DevServerOptions): ManagedProcess {
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(o.ports.grpc),
    '--http-port',
    String(o.ports.http),
    '--metrics-port',
    String(o.ports.metrics),
    '--ui-ip',
    '127.0.0.1',
    '--ui-port',
    String(o.ports.ui),
    '--db-filename',
    o.dbFile,
    // SQLite's default rollback journal syncs every commit twice; a write-ahead log with NORMAL sync
    // survives a crash of the server (not of the machine) and lets reads run beside the writer.
    '--sqlite-pragma',
    'journal_mode=wal',
    '--sqlite-pragma',
    'synchronous=normal',
    '--namespace',
    o.namespace,
    '--log-level',
    'warn',
    ...searchAttributes.flatMap((a) => ['--search-attribute', `${a.name}=${a.cliType}`]),
  ];
  return startProcess('temporal', o.binary, args, o.logFile);
}

/** The server at `address` answers its health check. */
export async function temporalServing(binary: string, address: string): Promise<boolean> {
  try {
    const out = execFileSync(binary, ['operator', 'cluster', 'health', '--address', address], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5_000,
    });
    return out.includes('SERVING');
  } catch {
    return false;
  }
}
