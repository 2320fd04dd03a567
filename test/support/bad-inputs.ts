const valid: Record<string, unknown> = {
  image: 'registry.example.com/models/classifier:v1',
  modelPath: '/models/classifier.pb',
  resources: { cpu: '100m', memory: '128Mi' },
};

/** Every bad input the issue names, with the words the rejection must contain. */
export const badInputs: { title: string; name?: string; spec: Record<string, unknown>; expect: RegExp }[] = [
  { title: 'missing image', spec: { ...valid, image: undefined }, expect: /image/ },
  { title: 'empty modelPath', spec: { ...valid, modelPath: '' }, expect: /modelPath/ },
  {
    title: 'neither modelPath nor storageUri',
    spec: { ...valid, modelPath: undefined },
    expect: /modelPath.*storageUri/,
  },
  {
    title: 'both modelPath and storageUri',
    spec: { ...valid, storageUri: 's3://models/digits.joblib' },
    expect: /modelPath.*storageUri/,
  },
  {
    title: 'a storageUri of another scheme',
    spec: { ...valid, modelPath: undefined, storageUri: 'gs://models/digits.joblib' },
    expect: /storageUri/,
  },
  {
    title: 'a storageUri with a sum of its own',
    spec: { ...valid, modelPath: undefined, storageUri: `s3://models/digits.joblib@sha256:${'a'.repeat(64)}` },
    expect: /storageUri.*sha256/,
  },
  {
    title: 'a storageUri with ".." segments (another bucket)',
    spec: { ...valid, modelPath: undefined, storageUri: 's3://team-a/../team-b/digits.joblib' },
    expect: /storageUri.*"\."/,
  },
  {
    title: 'a storageUri with %2E%2E segments',
    spec: { ...valid, modelPath: undefined, storageUri: 'https://example.com/models/%2E%2E/secret' },
    expect: /storageUri.*"\."/,
  },
  {
    title: 'a storageUri with credentials in it',
    spec: { ...valid, modelPath: undefined, storageUri: 'https://user:pass@example.com/digits.joblib' },
    expect: /storageUri.*credentials/,
  },
  {
    title: 'a storage URI as modelPath',
    spec: { ...valid, modelPath: 's3://models/digits.joblib' },
    expect: /modelPath.*storageUri/,
  },
  {
    title: 'a sha256 that is not 64 hex digits',
    spec: { ...valid, modelPath: undefined, storageUri: 's3://models/digits.joblib', sha256: 'abc' },
    expect: /sha256/,
  },
  {
    title: 'a sha256 with a pvc:// storageUri',
    spec: { ...valid, modelPath: undefined, storageUri: 'pvc://weights/digits.joblib', sha256: 'a'.repeat(64) },
    expect: /sha256/,
  },
  { title: 'cpu: "lots"', spec: { ...valid, resources: { cpu: 'lots', memory: '1Gi' } }, expect: /cpu/ },
  { title: 'cpu: 0', spec: { ...valid, resources: { cpu: 0, memory: '1Gi' } }, expect: /cpu/ },
  { title: 'memory: 1.5', spec: { ...valid, resources: { cpu: '1', memory: 1.5 } }, expect: /memory/ },
  { title: 'memory: -1Gi', spec: { ...valid, resources: { cpu: '1', memory: '-1Gi' } }, expect: /memory/ },
  { title: 'gpu: -1', spec: { ...valid, resources: { cpu: '1', memory: '1Gi', gpu: -1 } }, expect: /gpu/ },
  { title: 'minReplicas: 0', spec: { ...valid, minReplicas: 0 }, expect: /minReplicas/ },
  { title: 'replicas: 0', spec: { ...valid, replicas: 0 }, expect: /replicas/ },
  {
    title: 'minReplicas > maxReplicas',
    spec: { ...valid, minReplicas: 4, maxReplicas: 2 },
    expect: /minReplicas.*maxReplicas/,
  },
  { title: 'endpointType: SOAP', spec: { ...valid, endpointType: 'SOAP' }, expect: /endpointType|REST/ },
  { title: 'a 70-character name', name: `m${'x'.repeat(69)}`, spec: valid, expect: /63 characters/ },
  {
    title: 'a relative gateway path prefix',
    spec: { ...valid, gateway: { pathPrefix: 'models/x' } },
    expect: /pathPrefix/,
  },
  {
    title: 'rollout steps whose weights do not grow',
    spec: { ...valid, rollout: { strategy: 'Canary', steps: [{ weight: 50 }, { weight: 20 }] } },
    expect: /weight must be greater than the step before it/,
  },
  {
    title: 'a rollout weight of 100',
    spec: { ...valid, rollout: { strategy: 'Canary', steps: [{ weight: 100 }] } },
    expect: /weight/,
  },
  {
    title: 'a rollout pause of "soon"',
    spec: { ...valid, rollout: { strategy: 'Canary', steps: [{ weight: 10, pause: 'soon' }] } },
    expect: /pause/,
  },
  {
    title: 'a rollout pause of 25h',
    spec: { ...valid, rollout: { strategy: 'Canary', steps: [{ weight: 10, pause: '25h' }] } },
    expect: /pause must be a duration .* at most 24h/,
  },
  {
    title: 'a rollout on a 60-character name',
    name: `m${'x'.repeat(59)}`,
    spec: { ...valid, rollout: { strategy: 'Canary', steps: [{ weight: 10 }] } },
    expect: /56 characters for a rollout/,
  },
  {
    title: 'an image reference with spaces',
    spec: { ...valid, image: 'registry.example.com/my model:v1' },
    expect: /image/,
  },
];
