// The model cache's CSI node plugin as the kubelet drives it, outside a cluster: the plugin's own
// program (dist/src/csi-plugin.js) on Unix sockets, called over gRPC with the CSI specification's
// messages, against a real S3 store (SeaweedFS), binding real read-only mounts (root), and reading
// namespace quotas from the stack's apiserver. The kubelet's side, on the real node, is in
// test/e2e/model-storage.test.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { csiClients } from '../../src/csi/grpc.js';
import { isMounted } from '../../src/csi/mounts.js';
import { releaseVersion } from '../../src/process/release.js';
import {
  putObject,
  readCredentials,
  startObjectStore,
  type ObjectStoreInfo,
} from '../../tools/local-stack/object-store.js';
import { kubectlRun } from '../../tools/local-stack/stack.js';
import { stopProcess, type ManagedProcess } from '../../tools/local-stack/processes.js';
import { CountingProxy } from '../support/counting-proxy.js';
import { startEndlessStore } from '../support/endless-store.js';

const stack = inject('stack');
const plugin = fileURLToPath(new URL('../../dist/src/csi-plugin.js', import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), 'mmo-csi-'));
const kubeletDir = path.join(dir, 'kubelet');
const cacheDir = path.join(dir, 'cache');
const socket = path.join(kubeletDir, 'plugins', 'model-cache', 'csi.sock');
const registrationSocket = path.join(kubeletDir, 'plugins_registry', 'model-cache.sock');
const capacity = 192 * 2 ** 20;
const processes: ManagedProcess[] = [];
let store: ObjectStoreInfo;
let proxy: CountingProxy;
let running: { child: ChildProcess; log: string[] } | undefined;
const logs: string[] = [];
const namespaces = { a: `csi-a-${process.pid}`, b: `csi-b-${process.pid}`, small: `csi-small-${process.pid}` };

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function startPlugin(): Promise<void> {
  const log: string[] = [];
  const child = spawn(
    process.execPath,
    [plugin, `--kubelet-dir=${kubeletDir}`, `--cache-dir=${cacheDir}`, `--cache-size=${capacity}`, '--publish-wait=10'],
    { env: { PATH: process.env.PATH, NODE_NAME: 'test-node', KUBECONFIG: stack.kubeconfig } },
  );
  child.stderr!.on('data', (d: Buffer) => {
    log.push(d.toString());
    logs.push(d.toString());
  });
  running = { child, log };
  for (let i = 0; i < 100 && !log.join('').includes('"serving"'); i++) await sleep(100);
  if (!log.join('').includes('"serving"')) throw new Error(`the plugin did not start:\n${log.join('')}`);
}

function killPlugin(): Promise<void> {
  const child = running!.child;
  running = undefined;
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

type Call = (
  req: object,
  cb: (err: (Error & { code?: number; details?: string }) | null, res: unknown) => void,
) => void;

function call<T>(service: 'node' | 'identity' | 'registration', method: string, req: object): Promise<T> {
  const clients = csiClients(service === 'registration' ? registrationSocket : socket);
  const client = clients[service] as unknown as Record<string, Call> & { close(): void };
  return new Promise((resolve, reject) =>
    client[method]!.call(client, req, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res as T);
    }),
  );
}

const secrets = (keys = readCredentials(store), endpoint = proxy.endpoint) => ({
  AWS_ENDPOINT_URL: endpoint,
  AWS_REGION: store.region,
  AWS_ACCESS_KEY_ID: keys.accessKeyId,
  AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
});

let volumes = 0;
/** A NodePublishVolume as the kubelet sends it for an ephemeral inline volume. */
function publish(uri: string, namespace: string, o: { sha256?: string; secrets?: object; volume?: string } = {}) {
  const volume = o.volume ?? `csi-${++volumes}${'0'.repeat(8)}`;
  const target = path.join(kubeletDir, 'pods', volume, 'volumes', 'kubernetes.io~csi', 'model-cache', 'mount');
  const request = {
    volume_id: volume,
    target_path: target,
    readonly: true,
    volume_capability: { mount: {}, access_mode: { mode: 'SINGLE_NODE_READER_ONLY' } },
    volume_context: {
      uri,
      ...(o.sha256 ? { sha256: o.sha256 } : {}),
      'csi.storage.k8s.io/pod.namespace': namespace,
      'csi.storage.k8s.io/pod.name': 'p',
      'csi.storage.k8s.io/ephemeral': 'true',
    },
    secrets: o.secrets ?? secrets(),
  };
  return { volume, target, done: call<object>('node', 'NodePublishVolume', request) };
}

/** Publishes until the plugin stops answering "still fetching". */
async function published(uri: string, namespace: string, o: { sha256?: string; secrets?: object } = {}) {
  const volume = `csi-${++volumes}${'0'.repeat(8)}`;
  for (;;) {
    const p = publish(uri, namespace, { ...o, volume });
    try {
      await p.done;
      return p;
    } catch (err) {
      if ((err as { details?: string }).details?.startsWith('fetching')) continue;
      throw err;
    }
  }
}

const unpublish = (volume: string, target: string) =>
  call<object>('node', 'NodeUnpublishVolume', { volume_id: volume, target_path: target });

const cacheBytes = () =>
  ['entries', 'parts'].reduce(
    (n, f) => n + readdirSync(path.join(cacheDir, f)).reduce((m, e) => m + statSync(path.join(cacheDir, f, e)).size, 0),
    0,
  );

describe.skipIf(!stack.realNode)("the model cache's CSI node plugin, driven as the kubelet drives it", () => {
  beforeAll(async () => {
    store = await startObjectStore(
      { stateDir: dir, logFile: path.join(dir, 'object-store.log'), log: (l) => console.error(l) },
      (p) => (processes.push(p), p),
    );
    proxy = await CountingProxy.start(store.endpoint);
    for (const ns of Object.values(namespaces)) kubectlRun(stack, ['create', 'namespace', ns]);
    kubectlRun(stack, ['annotate', 'namespace', namespaces.small, 'stable.example.com/model-cache-quota=1Mi']);
    await startPlugin();
  }, 900_000);

  afterAll(async () => {
    if (running) await killPlugin();
    await proxy?.stop();
    for (const p of processes) await stopProcess(p);
    // Whatever a failed test left mounted, before the folder goes.
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      const m = line.split(' ')[4];
      if (m?.startsWith(dir)) spawn('umount', ['-l', m]);
    }
    await sleep(200);
    for (const ns of Object.values(namespaces)) kubectlRun(stack, ['delete', 'namespace', ns, '--wait=false']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers as a CSI plugin and names itself with the release', async () => {
    expect(await call('registration', 'GetInfo', {})).toMatchObject({
      type: 'CSIPlugin',
      name: 'model-cache.stable.example.com',
      endpoint: socket,
      supported_versions: ['1.0.0'],
    });
    expect(await call('identity', 'GetPluginInfo', {})).toEqual({
      name: 'model-cache.stable.example.com',
      vendor_version: releaseVersion,
      manifest: {},
    });
    expect(await call('node', 'NodeGetInfo', {})).toMatchObject({ node_id: 'test-node' });
  });

  it('mounts a verified artifact read-only; a second tenant naming the object shares the one fetch', async () => {
    const body = randomBytes(4 * 2 ** 20);
    const { uri, sha256 } = await putObject(store, 'shared/model.bin', body);
    const before = proxy.bytes;
    const first = await published(uri, namespaces.a, { sha256 });
    expect(await isMounted(first.target)).toBe(true);
    expect(sha(readFileSync(path.join(first.target, 'model.bin')))).toBe(sha256);
    // No process of the Pod can write the entry, root or not.
    expect(() => writeFileSync(path.join(first.target, 'model.bin'), 'x')).toThrow(/EROFS|read-only/);
    const second = await published(uri, namespaces.b, { sha256 });
    expect(sha(readFileSync(path.join(second.target, 'model.bin')))).toBe(sha256);
    const sent = proxy.bytes - before;
    console.log(`two tenants, one 4 MiB object: the store sent ${sent} bytes (${(sent / body.length).toFixed(4)}x)`);
    expect(sent / body.length).toBeLessThanOrEqual(1.05);
    await unpublish(second.volume, second.target);
    expect(await isMounted(second.target)).toBe(false);
    expect(existsSync(second.target)).toBe(false);
    expect(await isMounted(first.target)).toBe(true);
  });

  it("refuses a tenant the store refuses, with the store's 403, though the bytes are on the node", async () => {
    const { uri, sha256 } = await putObject(store, 'guarded/model.bin', randomBytes(2 ** 20));
    await published(uri, namespaces.a, { sha256 });
    const wrong = secrets({ accessKeyId: 'NOTAKEY', secretAccessKey: 'not-a-secret' });
    const refused = publish(uri, namespaces.b, { sha256, secrets: wrong });
    await expect(refused.done).rejects.toMatchObject({ code: 7, details: expect.stringMatching(/403/) });
    expect(await isMounted(refused.target)).toBe(false);
    // Anonymous, at the store's endpoint: the same.
    const anonymous = { AWS_ENDPOINT_URL: proxy.endpoint, AWS_REGION: store.region };
    await expect(publish(uri, namespaces.b, { sha256, secrets: anonymous }).done).rejects.toMatchObject({ code: 7 });
  });

  it('gives a namespace deleted and made again under its name nothing of the old one: it asks the store as anyone does', async () => {
    const { uri, sha256 } = await putObject(store, 'reborn/model.bin', randomBytes(2 ** 20));
    const old = await published(uri, namespaces.a, { sha256 });
    await unpublish(old.volume, old.target);
    kubectlRun(stack, ['delete', 'namespace', namespaces.a, '--wait=true', '--timeout=60s']);
    kubectlRun(stack, ['create', 'namespace', namespaces.a]);
    const wrong = secrets({ accessKeyId: 'NOTAKEY', secretAccessKey: 'not-a-secret' });
    await expect(publish(uri, namespaces.a, { sha256, secrets: wrong }).done).rejects.toMatchObject({ code: 7 });
    // Nothing on the node is named by a namespace.
    for (const folder of ['entries', 'objects', 'parts', 'views', 'mounts'])
      for (const name of readdirSync(path.join(cacheDir, folder))) expect(name).not.toContain(namespaces.a);
  });

  it("never serves another object's bytes to a tenant that names their sum with an object of its own", async () => {
    const secret = randomBytes(2 ** 20);
    const victim = await putObject(store, 'victim/model.bin', secret);
    await published(victim.uri, namespaces.a, { sha256: victim.sha256 });
    const own = await putObject(store, 'attacker/model.bin', randomBytes(2 ** 20));
    const attempt = publish(own.uri, namespaces.b, { sha256: victim.sha256 });
    await expect(attempt.done).rejects.toMatchObject({ code: 9, details: expect.stringMatching(/checksum mismatch/) });
  });

  it("refuses an artifact larger than the namespace's quota before fetching it", async () => {
    const { uri } = await putObject(store, 'large/model.bin', randomBytes(2 * 2 ** 20));
    const before = proxy.bytes;
    const p = publish(uri, namespaces.small);
    await expect(p.done).rejects.toMatchObject({
      code: 8,
      details: expect.stringMatching(/^QuotaExceeded: .*namespace csi-small/),
    });
    expect(proxy.bytes - before).toBeLessThan(64 * 1024);
  });

  it('stops a store that streams without end at the cap, keeps the cache under it, and does not fetch it again', async () => {
    const endless = await startEndlessStore();
    const endpoint = endless.endpoint;
    try {
      const started = Date.now();
      const p = publish('s3://models/endless/model.bin', namespaces.b, { secrets: secrets(undefined, endpoint) });
      await expect(p.done).rejects.toMatchObject({ code: 8, details: expect.stringMatching(/^CacheFull: /) });
      console.log(
        `an endless store: refused after ${Date.now() - started} ms and ${endless.sent} bytes; cache ${cacheBytes()} bytes`,
      );
      expect(cacheBytes()).toBeLessThanOrEqual(capacity);
      const asked = endless.requests;
      const again = publish('s3://models/endless/model.bin', namespaces.b, { secrets: secrets(undefined, endpoint) });
      await expect(again.done).rejects.toMatchObject({ code: 8 });
      // Only the one-byte question: the refusal stands without a byte fetched.
      expect(endless.requests - asked).toBe(1);
    } finally {
      endless.stop();
    }
  }, 120_000);

  it('resumes a fetch the plugin was killed in the middle of: at most 1.1x the artifact sent', async () => {
    // Large enough that what the sockets held at the kill (a few MiB, counted by the proxy) is small beside it.
    const body = randomBytes(128 * 2 ** 20);
    const { uri, sha256 } = await putObject(store, 'resumed/model.bin', body);
    const before = proxy.bytes;
    proxy.throttle = 16 * 2 ** 20;
    const volume = `csi-resumed${'0'.repeat(8)}`;
    const first = publish(uri, namespaces.b, { sha256, volume });
    first.done.catch(() => undefined);
    const parts = path.join(cacheDir, 'parts');
    for (let i = 0; i < 600; i++) {
      const size = readdirSync(parts).reduce(
        (n, e) => n + (e.endsWith('.etag') ? 0 : statSync(path.join(parts, e)).size),
        0,
      );
      if (size >= body.length / 2) break;
      await sleep(50);
    }
    await killPlugin();
    proxy.throttle = 0;
    await startPlugin();
    const again = await published(uri, namespaces.b, { sha256 });
    expect(sha(readFileSync(path.join(again.target, 'model.bin')))).toBe(sha256);
    const sent = proxy.bytes - before;
    console.log(`128 MiB over a SIGKILLed plugin: the store sent ${sent} bytes (${(sent / body.length).toFixed(3)}x)`);
    expect(sent / body.length).toBeLessThanOrEqual(1.1);
  }, 180_000);

  it('says what it cannot use in one line: a bad sum, a URI it does not serve, a Secret without keys', async () => {
    await expect(publish('s3://models/x/m.bin', namespaces.a, { sha256: 'abc' }).done).rejects.toMatchObject({
      code: 3,
      details: 'the sha256 attribute is not 64 lowercase hex digits',
    });
    await expect(publish('pvc://claim/m.bin', namespaces.a).done).rejects.toMatchObject({ code: 3 });
    await expect(
      publish('s3://models/x/m.bin', namespaces.a, { secrets: { AWS_ACCESS_KEY_ID: 'only-the-id' } }).done,
    ).rejects.toMatchObject({
      code: 9,
      details: 's3://models/x/m.bin: the storageSecret has no key AWS_SECRET_ACCESS_KEY',
    });
    await expect(publish('s3://models/nothing/here.bin', namespaces.a).done).rejects.toMatchObject({
      code: 5,
      details: expect.stringMatching(/404 NoSuchKey/),
    });
  });

  it("keeps the store's keys out of its log", () => {
    const all = logs.join('');
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(readCredentials(store).secretAccessKey);
    expect(all).not.toContain('not-a-secret');
  });
});
