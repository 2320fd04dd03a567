import { describe, expect, it } from 'vitest';
import {
  caddyRoute,
  caddyTrackServers,
  insertionIndex,
  trackServerName,
} from '../../activities/gateway/caddy-routes.js';
import { httpRoute } from '../../activities/gateway/gateway-api-driver.js';
import { defaultBuildOptions } from '../../src/core/desired-state.js';
import {
  collisionLosers,
  delegatedHostnamesAnnotation,
  delegatedPrefixesAnnotation,
  delegationOf,
  findConflict,
  needsDelegation,
  parseRouteId,
  prefixesCollide,
  routeId,
  routeRefusal,
  routeSpec,
  wantsRoute,
} from '../../src/core/route-rules.js';
import { validateSpec } from '../../src/core/validation.js';

const ref = { namespace: 'ml', name: 'clf', uid: '1234-abcd' };
const spec = { image: 'r/m:1', modelPath: '/m', resources: { cpu: '1', memory: '1Gi' } };

describe('route identity', () => {
  it('derives a stable id from namespace, name and uid, and parses it back', () => {
    expect(routeId(ref)).toBe('machinemodel.ml.clf.1234-abcd');
    expect(parseRouteId(routeId(ref))).toEqual(ref);
    expect(parseRouteId('someone-elses-route')).toBeUndefined();
  });
});

describe('routeSpec', () => {
  it('defaults the path prefix to /models/<ns>/<name> and points at the Service', () => {
    const r = routeSpec(ref, spec, defaultBuildOptions);
    expect(r).toMatchObject({
      pathPrefix: '/models/ml/clf',
      hostnames: [],
      protocol: 'http',
      service: { host: 'clf.ml.svc.cluster.local', port: 80 },
    });
  });

  it("takes the model's own prefix (without trailing slash) and hostnames; gRPC goes to 9000 over HTTP/2", () => {
    const r = routeSpec(
      ref,
      {
        ...spec,
        endpointType: 'gRPC',
        gateway: { pathPrefix: '/team/clf/', hostnames: ['b.example.com', 'a.example.com'] },
      },
      defaultBuildOptions,
    );
    expect(r).toMatchObject({
      pathPrefix: '/team/clf',
      hostnames: ['a.example.com', 'b.example.com'],
      protocol: 'grpc',
      service: { port: 9000 },
    });
    expect(caddyRoute(r).handle?.[1]).toMatchObject({ transport: { versions: ['h2c', '2'] } });
  });

  it('can be switched off per model', () => {
    expect(wantsRoute(spec)).toBe(true);
    expect(wantsRoute({ ...spec, gateway: { enabled: false } })).toBe(false);
  });
});

describe('collisions', () => {
  it('treats equal and nested prefixes as colliding, siblings not', () => {
    expect(prefixesCollide('/a', '/a/')).toBe(true);
    expect(prefixesCollide('/a', '/a/b')).toBe(true);
    expect(prefixesCollide('/a', '/ab')).toBe(false);
    expect(prefixesCollide('/', '/anything')).toBe(true);
  });

  it('ignores routes of the same model (any uid) and names the model that holds a prefix', () => {
    const wanted = routeSpec(ref, spec, defaultBuildOptions);
    const mine = { id: routeId({ ...ref, uid: 'old' }), owner: { ...ref, uid: 'old' }, pathPrefix: '/models/ml/clf' };
    expect(findConflict(wanted, [mine])).toEqual({ kind: 'none' });
    const other = { id: 'x', owner: { namespace: 'ml', name: 'other', uid: 'u' }, pathPrefix: '/models/ml' };
    expect(findConflict(wanted, [mine, other])).toEqual({ kind: 'taken', by: 'MachineModel ml/other' });
    expect(findConflict(wanted, [{ id: 'manual', pathPrefix: '/models/ml/clf/v1' }])).toEqual({
      kind: 'taken',
      by: 'route manual',
    });
  });

  it("after a race, keeps the oldest model's route and names the younger colliding ones as losers", () => {
    const route = (name: string, uid: string, pathPrefix: string, createdAt: string) => ({
      id: routeId({ namespace: 'ml', name, uid }),
      owner: { namespace: 'ml', name, uid },
      pathPrefix,
      createdAt,
    });
    const oldest = route('a', 'u3', '/shared', '2026-11-22T10:00:00Z');
    const younger = route('b', 'u1', '/shared', '2026-11-22T10:00:05Z');
    const nested = route('c', 'u2', '/shared/v2', '2026-11-22T10:00:09Z');
    const elsewhere = route('d', 'u4', '/other', '2026-11-22T09:00:00Z');
    expect(collisionLosers([nested, younger, elsewhere, oldest]).map((r) => r.owner.name)).toEqual(['b', 'c']);
    // Created in the same second: the smaller uid wins, the same on every replica.
    const twin = route('e', 'u0', '/shared', '2026-11-22T10:00:00Z');
    expect(collisionLosers([oldest, twin]).map((r) => r.owner.name)).toEqual(['a']);
    // Two routes of one model (an old prefix not yet removed) do not collide with each other.
    expect(collisionLosers([oldest, { ...oldest, id: 'x', pathPrefix: '/shared/old' }])).toEqual([]);
  });
});

describe('gateway objects', () => {
  const r = routeSpec(ref, spec, defaultBuildOptions);

  it('builds a Caddy route that strips the prefix and proxies to the Service', () => {
    expect(caddyRoute(r)).toEqual({
      '@id': 'machinemodel.ml.clf.1234-abcd',
      match: [{ path: ['/models/ml/clf', '/models/ml/clf/*'] }],
      handle: [
        { handler: 'rewrite', strip_path_prefix: '/models/ml/clf' },
        {
          handler: 'reverse_proxy',
          upstreams: [{ dial: 'clf.ml.svc.cluster.local:80' }],
          load_balancing: { try_duration: '5s', try_interval: '250ms' },
        },
      ],
      terminal: true,
    });
  });

  it('splits a canary step between the stable and canary Services by weight, on Caddy and on the Gateway API', () => {
    const split = routeSpec(ref, spec, defaultBuildOptions, 10);
    // Caddy: through one server per revision on an abstract socket, so its metrics count each apart.
    const proxy = caddyRoute(split).handle?.[1] as { upstreams: { dial: string }[] };
    expect(proxy).toMatchObject({
      handler: 'reverse_proxy',
      load_balancing: {
        selection_policy: { policy: 'weighted_round_robin', weights: [90, 10] },
        try_duration: '5s',
        try_interval: '250ms',
      },
    });
    const servers = caddyTrackServers(split);
    const stable = trackServerName(split.id, 'stable');
    const canary = trackServerName(split.id, 'canary');
    expect(Object.keys(servers)).toEqual([stable, canary]);
    const listen = (name: string) => (servers[name] as { listen: string[] }).listen;
    expect(proxy.upstreams).toEqual([{ dial: listen(stable)[0] }, { dial: listen(canary)[0] }]);
    expect(listen(canary)[0]).toMatch(/^unix\/@mmo-[0-9a-f]{16}-canary$/);
    expect(servers[canary]).toMatchObject({
      routes: [{ handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: 'clf-canary.ml.svc.cluster.local:80' }] }] }],
    });
    expect(servers[stable]).toMatchObject({
      routes: [{ handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: 'clf.ml.svc.cluster.local:80' }] }] }],
    });
    expect(caddyTrackServers(r)).toEqual({});
    expect(httpRoute(split, { namespace: 'gw', name: 'public' }).spec.rules[0]!.backendRefs).toEqual([
      { name: 'clf', port: 80, weight: 90 },
      { name: 'clf-canary', port: 80, weight: 10 },
    ]);
    // Weight 0 (before the first step, after a rollback): the stable Service alone, as without a rollout.
    expect(routeSpec(ref, spec, defaultBuildOptions, 0)).toEqual(r);
  });

  it('builds an HTTPRoute owned by the model, attached to the parent Gateway', () => {
    const h = httpRoute(r, { namespace: 'gw', name: 'public' });
    expect(h.metadata.ownerReferences[0]).toMatchObject({ kind: 'MachineModel', uid: '1234-abcd', controller: true });
    expect(h.metadata.annotations['stable.example.com/route-id']).toBe('machinemodel.ml.clf.1234-abcd');
    expect(h.spec.parentRefs[0]).toMatchObject({ name: 'public', namespace: 'gw' });
    expect(h.spec.rules[0]!.backendRefs[0]).toEqual({ name: 'clf', port: 80 });
  });
});

describe('gateway validation', () => {
  it('rejects relative or empty-segment prefixes and bad hostnames', () => {
    expect(validateSpec({ ...spec, gateway: { pathPrefix: 'models/x' } }).join()).toMatch(/pathPrefix/);
    expect(validateSpec({ ...spec, gateway: { pathPrefix: '/a//b' } }).join()).toMatch(/pathPrefix/);
    expect(validateSpec({ ...spec, gateway: { hostnames: ['not a host'] } }).join()).toMatch(/hostnames/);
    expect(validateSpec({ ...spec, gateway: { pathPrefix: '/ok/path', hostnames: ['*.example.com'] } })).toEqual([]);
  });
});

describe('one gateway, many tenants', () => {
  it('compares prefixes as Caddy matches them: letter case ignored (a route /Models answered /models/b/victim)', () => {
    expect(prefixesCollide('/Models', '/models/b/victim')).toBe(true);
    expect(prefixesCollide('/models/B/x', '/models/b/x/')).toBe(true);
    expect(prefixesCollide('/MODELS/a', '/models/ab')).toBe(false);
    const victim = {
      id: 'machinemodel.b.victim.1',
      owner: { namespace: 'b', name: 'victim', uid: '1' },
      pathPrefix: '/models/b/victim',
    };
    expect(
      findConflict(
        routeSpec(
          { namespace: 'a', name: 'x', uid: '2' },
          { ...spec, gateway: { pathPrefix: '/Models' } },
          defaultBuildOptions,
        ),
        [victim],
      ),
    ).toEqual({
      kind: 'taken',
      by: 'MachineModel b/victim',
    });
  });

  const route = (namespace: string, pathPrefix: string, hostnames: string[] = []) => ({
    namespace,
    pathPrefix,
    hostnames,
  });
  const none = delegationOf(undefined);

  it('lets a namespace publish under /models/<namespace>/ and nowhere else without a delegation', () => {
    expect(routeRefusal(route('a', '/models/a/clf'), none)).toBeUndefined();
    expect(routeRefusal(route('a', '/Models/A/clf'), none)).toBeUndefined();
    expect(needsDelegation(route('a', '/models/a/clf'))).toBe(false);
    // Squatting another namespace's default URL, its whole space, the namespace root, everything.
    for (const squat of ['/models/b/late', '/models/b', '/models/a', '/models', '/', '/MODELS/B/x', '/models/ab/x']) {
      expect(needsDelegation(route('a', squat)), squat).toBe(true);
      expect(routeRefusal(route('a', squat), none)?.reason, squat).toBe('PathNotAllowed');
    }
  });

  it('takes further prefixes and hostnames from annotations on the Namespace, and nothing beyond them', () => {
    const d = delegationOf({
      [delegatedPrefixesAnnotation]: '/api/team-a, /v2/team-a ,not-a-path',
      [delegatedHostnamesAnnotation]: 'models.team-a.example,*.acc.example',
    });
    expect(d).toEqual({
      pathPrefixes: ['/api/team-a', '/v2/team-a'],
      hostnames: ['models.team-a.example', '*.acc.example'],
    });
    expect(routeRefusal(route('a', '/api/team-a'), d)).toBeUndefined();
    expect(routeRefusal(route('a', '/API/team-a/clf'), d)).toBeUndefined();
    expect(routeRefusal(route('a', '/api/team-ab'), d)?.reason).toBe('PathNotAllowed');
    expect(routeRefusal(route('a', '/api'), d)?.reason).toBe('PathNotAllowed');
    expect(routeRefusal(route('a', '/models/a/x', ['models.team-a.example', 'x.acc.example']), d)).toBeUndefined();
    const refused = routeRefusal(route('a', '/models/a/x', ['models.team-b.example', 'acc.example']), d);
    expect(refused?.reason).toBe('HostnameNotAllowed');
    expect(refused?.message).toContain('models.team-b.example, acc.example');
    expect(routeRefusal(route('a', '/models/a/x', ['models.acc.example']), none)?.reason).toBe('HostnameNotAllowed');
    expect(needsDelegation(route('a', '/models/a/x', ['h.example']))).toBe(true);
  });

  it("never lets a delegation reach into another namespace's /models/<namespace>/ space", () => {
    const wide = delegationOf({ [delegatedPrefixesAnnotation]: '/,/models,/MODELS/b' });
    for (const squat of ['/models/b/x', '/models', '/', '/Models/B/x'])
      expect(routeRefusal(route('a', squat), wide)?.reason, squat).toBe('PathNotAllowed');
    expect(routeRefusal(route('a', '/api/anything'), wide)).toBeUndefined();
    expect(routeRefusal(route('a', '/models/a/x'), wide)).toBeUndefined();
  });

  it("orders Caddy's routes by specificity, not age: a new route goes ahead of every shorter prefix", () => {
    const r = (p?: string) => (p ? { match: [{ path: [p, `${p}/*`] }] } : { '@id': 'catch-all' });
    const routes = [r('/models/b/victim'), r('/models/a'), r()];
    expect(insertionIndex(routes, '/Models')).toBe(2);
    expect(insertionIndex(routes, '/models/b/victim/long')).toBe(0);
    expect(insertionIndex(routes, '/models/c/d')).toBe(1);
    expect(insertionIndex([], '/x')).toBe(0);
  });
});
