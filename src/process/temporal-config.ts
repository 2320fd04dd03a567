// Where Temporal is and how to reach it: the flags the operator and mmctl share, and what they mean.
import { InvalidArgumentError, Option, type Command } from 'commander';

export interface TemporalConfig {
  address: string;
  namespace: string;
  taskQueue: string;
  tls?: { serverName?: string; caFile?: string; certFile?: string; keyFile?: string };
  /** From TEMPORAL_API_KEY only, never a flag (flags show in process lists); never logged. */
  apiKey?: string;
}

export function temporalOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option('--temporal-address <host:port>', 'Temporal frontend')
        .env('TEMPORAL_ADDRESS')
        .default('127.0.0.1:7233'),
    )
    .addOption(
      new Option('--temporal-namespace <ns>', 'Temporal namespace').env('TEMPORAL_NAMESPACE').default('default'),
    )
    .addOption(
      new Option('--task-queue <name>', 'task queue of the operator')
        .env('MMO_TASK_QUEUE')
        .default('machinemodel-operator'),
    )
    .addOption(
      new Option('--temporal-tls', 'connect to Temporal with TLS (implied by a client cert or API key)').env(
        'TEMPORAL_TLS',
      ),
    )
    .addOption(
      new Option('--temporal-tls-server-name <name>', 'TLS server name override').env('TEMPORAL_TLS_SERVER_NAME'),
    )
    .addOption(
      new Option('--temporal-tls-ca <file>', 'CA certificate for the Temporal server').env(
        'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      ),
    )
    .addOption(
      new Option('--temporal-tls-cert <file>', 'client certificate (mTLS)').env('TEMPORAL_TLS_CLIENT_CERT_PATH'),
    )
    .addOption(new Option('--temporal-tls-key <file>', 'client key (mTLS)').env('TEMPORAL_TLS_CLIENT_KEY_PATH'));
}

export interface TemporalFlags {
  temporalAddress: string;
  temporalNamespace: string;
  taskQueue: string;
  temporalTls?: boolean | string;
  temporalTlsServerName?: string;
  temporalTlsCa?: string;
  temporalTlsCert?: string;
  temporalTlsKey?: string;
}

export function temporalConfigFrom(flags: TemporalFlags, env: NodeJS.ProcessEnv = process.env): TemporalConfig {
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  const wantsTls = flags.temporalTls === true || flags.temporalTls === 'true' || !!flags.temporalTlsCert || !!apiKey;
  if (!!flags.temporalTlsCert !== !!flags.temporalTlsKey) {
    throw new InvalidArgumentError('--temporal-tls-cert and --temporal-tls-key go together');
  }
  return {
    address: flags.temporalAddress,
    namespace: flags.temporalNamespace,
    taskQueue: flags.taskQueue,
    apiKey,
    tls: wantsTls
      ? {
          serverName: flags.temporalTlsServerName,
          caFile: flags.temporalTlsCa,
          certFile: flags.temporalTlsCert,
          keyFile: flags.temporalTlsKey,
        }
      : undefined,
  };
}
