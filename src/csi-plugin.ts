#!/usr/bin/env node
// The model cache's CSI node plugin (docs/model-storage.md): one per node, the DaemonSet of the
// operator's install, the only writer of the node's cache. It registers with the kubelet through
// the plugin-registration socket and serves the CSI Identity and Node services for ephemeral
// inline volumes of driver `model-cache.stable.example.com`.
import { mkdir, statfs } from 'node:fs/promises';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Command, InvalidArgumentError } from 'commander';
import { cacheQuotaAnnotation, parseQuota } from './core/model-cache.js';
import { csiDriverName } from './core/model-source.js';
import { csiServices, registrationService, serveOnSocket } from './csi/grpc.js';
import { mountCommands } from './csi/mounts.js';
import { NodeCache } from './csi/node-cache.js';
import { nodeService } from './csi/node-service.js';
import { createLogger } from './process/logger.js';
import { releaseVersion } from './process/release.js';

const quantity = (text: string) => {
  const q = parseQuota(text);
  if (q.bytes === undefined) throw new InvalidArgumentError(q.invalid ?? 'a byte quantity, for example 20Gi');
  return q.bytes;
};

const flags = new Command('csi-plugin')
  .description("the model cache's CSI node plugin")
  .option('--node-id <name>', 'this node (the DaemonSet passes spec.nodeName)', process.env.NODE_NAME)
  .option('--kubelet-dir <dir>', "the kubelet's root directory", '/var/lib/kubelet')
  .option('--cache-dir <dir>', "the node's model cache", '/var/lib/machinemodel-operator/model-cache')
  .option('--cache-size <bytes>', 'the cap on the cache (default: 30% of its filesystem)', quantity)
  .option('--busybox <path>', "a static busybox whose mount and umount the plugin runs (the image's)")
  .option('--publish-wait <seconds>', 'how long a publish waits for a fetch before it reports progress', '30')
  .option('--log-level <level>', 'log level', 'info')
  .parse()
  .opts<{
    nodeId?: string;
    kubeletDir: string;
    cacheDir: string;
    cacheSize?: number;
    busybox?: string;
    publishWait: string;
    logLevel: string;
  }>();

const logger = createLogger(flags.logLevel).child({ component: 'csi-plugin' });
const log = ({ msg, ...line }: Record<string, unknown>) => logger.info(line, String(msg ?? ''));

async function main(): Promise<void> {
  if (!flags.nodeId) throw new Error('--node-id (or NODE_NAME) is required');
  await mkdir(flags.cacheDir, { recursive: true });
  const fs = await statfs(flags.cacheDir);
  const capacity = flags.cacheSize ?? Math.floor(fs.blocks * fs.bsize * 0.3);
  const cache = await NodeCache.open({ dir: flags.cacheDir, capacity, mounts: mountCommands(flags.busybox), log });
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const core = kc.makeApiClient(CoreV1Api);
  const service = nodeService({
    driver: csiDriverName,
    kubeletDir: flags.kubeletDir,
    version: releaseVersion,
    nodeId: flags.nodeId,
    cache,
    quotaOf: async (namespace) =>
      (await core.readNamespace({ name: namespace })).metadata?.annotations?.[cacheQuotaAnnotation],
    waitMs: Number(flags.publishWait) * 1000,
    log,
  });
  const { Identity, Node } = csiServices();
  // Short names: a Unix socket's path has at most 107 bytes, and the kubelet's folder may be long
  // (the local stack's is about 73 characters).
  const csiSocket = path.join(flags.kubeletDir, 'plugins', 'model-cache', 'csi.sock');
  await mkdir(path.dirname(csiSocket), { recursive: true });
  const csi = await serveOnSocket(csiSocket, [
    [Identity!, service.identity],
    [Node!, service.node],
  ]);
  // Registered last: the kubelet calls the CSI socket as soon as it reads the registration.
  const registry = path.join(flags.kubeletDir, 'plugins_registry');
  await mkdir(registry, { recursive: true });
  const registration = await serveOnSocket(path.join(registry, 'model-cache.sock'), [
    [
      registrationService(),
      {
        GetInfo: (_call: unknown, callback: (err: null, info: object) => void) =>
          callback(null, {
            type: 'CSIPlugin',
            name: csiDriverName,
            endpoint: csiSocket,
            supported_versions: ['1.0.0'],
          }),
        NotifyRegistrationStatus: (
          call: { request: { plugin_registered?: boolean; error?: string } },
          callback: (err: null, answer: object) => void,
        ) => {
          log({ msg: 'kubelet registration', registered: call.request.plugin_registered, error: call.request.error });
          callback(null, {});
        },
      },
    ],
  ]);
  log({ msg: 'serving', socket: csiSocket, capacity, node: flags.nodeId, version: releaseVersion });
  const stop = () => {
    registration.forceShutdown();
    csi.forceShutdown();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  logger.error({ err: (err as Error).message }, 'the model cache plugin cannot start');
  process.exit(1);
});
