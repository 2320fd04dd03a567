import { afterEach, describe, expect, it } from 'vitest';
import { parseOperatorConfig } from '../../src/process/config.js';

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
});

describe('parseOperatorConfig', () => {
  it('has production defaults', () => {
    delete process.env.TEMPORAL_ADDRESS;
    delete process.env.MMO_NAMESPACES;
    const c = parseOperatorConfig([]);
    expect(c.temporal).toMatchObject({
      address: '127.0.0.1:7233',
      namespace: 'default',
      taskQueue: 'machinemodel-operator',
    });
    expect(c.namespaces).toEqual([]);
    expect(c.role).toBe('all');
    expect(c.stickyQueueTimeoutSeconds).toBe(10);
    expect(c.maxConcurrentLocalActivities).toBe(16);
    expect(c.maxStartingModels).toBe(64);
    expect(c.sharding).toMatchObject({ shards: 0, hash: 'mixed' });
    expect(c.workflow).toEqual({
      progressDeadlineSeconds: 600,
      driftCheckSeconds: 36_000,
      readinessRecheckSeconds: { initial: 60, max: 300 },
    });
  });

  it('takes environment variables, and flags over them', () => {
    process.env.MMO_NAMESPACES = 'a, b';
    process.env.MMO_TASK_QUEUE = 'q-env';
    process.env.MMO_READINESS_RECHECK_SECONDS = '3';
    process.env.MMO_MAX_CONCURRENT_LOCAL_ACTIVITIES = '8';
    const c = parseOperatorConfig(['--task-queue', 'q-flag', '--progress-deadline', '30']);
    expect(c.namespaces).toEqual(['a', 'b']);
    expect(c.temporal.taskQueue).toBe('q-flag');
    expect(c.workflow.progressDeadlineSeconds).toBe(30);
    expect(c.workflow.readinessRecheckSeconds).toEqual({ initial: 3, max: 300 });
    expect(c.maxConcurrentLocalActivities).toBe(8);
    expect(parseOperatorConfig(['--sticky-queue-timeout', '60']).stickyQueueTimeoutSeconds).toBe(60);
    expect(parseOperatorConfig(['--max-starting-models', '0']).maxStartingModels).toBe(0);
  });

  it('turns TLS on for an API key, which comes only from the environment', () => {
    process.env.TEMPORAL_API_KEY = 'secret-key';
    const c = parseOperatorConfig([]);
    expect(c.temporal.apiKey).toBe('secret-key');
    expect(c.temporal.tls).toBeDefined();
  });

  it('rejects bad values with a message naming the flag', () => {
    expect(() => parseOperatorConfig(['--progress-deadline', 'soon'])).toThrow(
      /--progress-deadline must be a whole number/,
    );
    expect(() => parseOperatorConfig(['--role', 'boss'])).toThrow(/role/);
    expect(() => parseOperatorConfig(['--shard-hash', 'fnv'])).toThrow(/shard-hash.*mixed, apiserver/);
    process.env.MMO_SHARD_HASH = 'apiserver';
    expect(parseOperatorConfig([]).sharding.hash).toBe('apiserver');
    expect(() => parseOperatorConfig(['--max-starting-models', '-1'])).toThrow(
      /--max-starting-models must be a whole number >= 0/,
    );
    expect(() => parseOperatorConfig(['--temporal-tls-cert', '/c.pem'])).toThrow(/go together/);
  });

  it('rejects a Caddy admin URL that does not parse without repeating it (it may hold credentials)', () => {
    const parse = () => parseOperatorConfig(['--gateway', 'caddy', '--caddy-admin', 'http://admin:s3cret@[caddy']);
    expect(parse).toThrow(/--caddy-admin must be http\(s\) URLs separated by commas/);
    expect(parse).not.toThrow(/s3cret/);
    // A host:port without a scheme parses as a URL of scheme "caddy-admin.gw.svc:".
    expect(() => parseOperatorConfig(['--gateway', 'caddy', '--caddy-admin', 'caddy-admin.gw.svc:2019'])).toThrow(
      /must be http\(s\) URLs/,
    );
    // Two URLs of one replica (another path or other credentials): its traffic would count once.
    const twice = ['--gateway', 'caddy', '--caddy-admin', 'http://u:p@10.0.0.7:2019/a,http://10.0.0.7:2019/b'];
    expect(() => parseOperatorConfig(twice)).toThrow(/scheme, host and port of its own/);
    expect(
      parseOperatorConfig(['--gateway', 'caddy', '--caddy-admin', 'http://a:2019,http://b:2019']).gateway,
    ).toMatchObject({
      adminURL: 'http://a:2019,http://b:2019',
    });
  });
});
