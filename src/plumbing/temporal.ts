// Connections to Temporal from the operator's configuration.
import { readFileSync } from 'node:fs';
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { TemporalConfig } from './config.js';

function tlsOptions(cfg: TemporalConfig) {
  if (!cfg.tls) return undefined;
  const { serverName, caFile, certFile, keyFile } = cfg.tls;
  return {
    serverNameOverride: serverName,
    serverRootCACertificate: caFile ? readFileSync(caFile) : undefined,
    clientCertPair: certFile && keyFile ? { crt: readFileSync(certFile), key: readFileSync(keyFile) } : undefined,
  };
}

export async function connectClient(cfg: TemporalConfig): Promise<Connection> {
  const options: ConnectionOptions = { address: cfg.address, tls: tlsOptions(cfg), apiKey: cfg.apiKey };
  return Connection.connect(options);
}

export async function connectWorker(cfg: TemporalConfig): Promise<NativeConnection> {
  const options: NativeConnectionOptions = { address: cfg.address, tls: tlsOptions(cfg), apiKey: cfg.apiKey };
  return NativeConnection.connect(options);
}
