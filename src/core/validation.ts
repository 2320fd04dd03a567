// Validation of a MachineModel, mirroring the CRD's schema and CEL rules so that objects which
// reached the API some other way (an older CRD, CEL disabled) still get a clear Failed condition.
// Workflow-safe: pure.
import type { MachineModelSpec } from './api.js';
import { validateRollout } from './rollout.js';
import { modelSource, sha256Pattern, storageUriPattern, storageUriProblem } from './model-source.js';

const quantityPattern = /^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/;

const suffixFactor: Record<string, number> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The value of a Kubernetes resource quantity, or undefined when it does not parse. */
export function parseQuantity(q: string): number | undefined {
  const m = quantityPattern.exec(q);
  if (!m) return undefined;
  const number = Number(m[1]) * (q.startsWith('-') ? -1 : 1);
  const suffix = m[3] ?? '';
  if (/^[eE]/.test(suffix)) return number * 10 ** Number(suffix.slice(1));
  return number * (suffixFactor[suffix] ?? NaN);
}

/** Two quantity strings of the same value, however written: the apiserver writes "0.5" back as "500m". */
export function sameQuantity(a: string, b: string): boolean {
  const x = parseQuantity(a);
  const y = parseQuantity(b);
  return x !== undefined && y !== undefined && Math.abs(x - y) <= Math.abs(x) * 1e-12;
}

// The distribution/reference grammar: [domain[:port]/]path[:tag][@digest].
const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const domain = `${domainComponent}(?:\\.${domainComponent})*(?::[0-9]+)?`;
const pathComponent = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const tag = '[\\w][\\w.-]{0,127}';
const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
export const imageReferencePattern = `^(?:${domain}/)?${pathComponent}(?:/${pathComponent})*(?::${tag})?(?:@${digest})?$`;
const imageReference = new RegExp(imageReferencePattern);

/** A DNS-1035 label: the Service takes the model's name, so the name must be a valid Service name. */
export const serviceNamePattern = '^[a-z]([-a-z0-9]*[a-z0-9])?$';
export const maxNameLength = 63;

export function validateName(name: string): string[] {
  const errors: string[] = [];
  if (name.length > maxNameLength)
    errors.push(
      `metadata.name must be at most ${maxNameLength} characters (it names the model's Service), got ${name.length}`,
    );
  if (!new RegExp(serviceNamePattern).test(name)) {
    errors.push(
      'metadata.name must start with a letter and contain only lowercase letters, digits and "-" (it names the model\'s Service)',
    );
  }
  return errors;
}

export const pathPrefixPattern = '^/[A-Za-z0-9._~/-]*$';
const hostnamePattern = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** What is wrong with the spec's gateway part: a route is never put from one that is. */
export function validateGateway(g: MachineModelSpec['gateway']): string[] {
  if (!g) return [];
  const errors: string[] = [];
  if (
    g.pathPrefix !== undefined &&
    (!new RegExp(pathPrefixPattern).test(g.pathPrefix) || g.pathPrefix.length > 256 || g.pathPrefix.includes('//'))
  ) {
    errors.push(
      `spec.gateway.pathPrefix must be an absolute URL path such as /models/team/classifier, got "${g.pathPrefix}"`,
    );
  }
  for (const h of g.hostnames ?? []) {
    if (!hostnamePattern.test(h) || h.length > 253) errors.push(`spec.gateway.hostnames: "${h}" is not a DNS hostname`);
  }
  return errors;
}

export const secretNamePattern = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';

/** Exactly one of modelPath and storageUri, each well formed (model-source.ts). */
function validateModelSource(spec: Partial<MachineModelSpec>): string[] {
  const { modelPath, storageUri, sha256, storageSecret } = spec;
  const hasPath = modelPath !== undefined;
  const hasUri = storageUri !== undefined;
  if (hasPath === hasUri)
    return [
      hasPath
        ? 'spec.modelPath and spec.storageUri are both set: give one (modelPath for weights in the image, storageUri for weights in storage)'
        : 'spec.modelPath or spec.storageUri is required',
    ];
  const errors: string[] = [];
  if (hasPath) {
    if (typeof modelPath !== 'string' || modelPath.trim() === '') errors.push('spec.modelPath must not be empty');
    else if (modelSource(modelPath).kind !== 'path')
      errors.push(`spec.modelPath "${modelPath}" is a storage URI: give it as spec.storageUri`);
  } else if (typeof storageUri !== 'string' || !new RegExp(storageUriPattern).test(storageUri)) {
    errors.push(
      `spec.storageUri "${String(storageUri)}" must be s3://<bucket>/<key>, https://<host>/<path> or pvc://<claim>/<path>`,
    );
  } else {
    const problem = storageUriProblem(storageUri);
    if (problem) errors.push(`spec.storageUri ${problem}`);
  }
  if (sha256 !== undefined) {
    if (!hasUri || modelSource(storageUri).kind === 'pvc')
      errors.push('spec.sha256 applies to an s3:// or https:// storageUri only');
    else if (!new RegExp(sha256Pattern).test(sha256))
      errors.push(`spec.sha256 must be 64 lowercase hex digits, got "${sha256}"`);
  }
  if (storageSecret !== undefined && (!new RegExp(secretNamePattern).test(storageSecret) || storageSecret.length > 253))
    errors.push(`spec.storageSecret "${storageSecret}" is not a Secret name`);
  return errors;
}

/** Every problem with the spec, as messages a user can act on; empty when valid. */
export function validateSpec(spec: Partial<MachineModelSpec> | undefined): string[] {
  const errors: string[] = [];
  if (!spec) return ['spec is required'];
  if (typeof spec.image !== 'string' || spec.image === '') errors.push('spec.image is required');
  else if (!imageReference.test(spec.image)) errors.push(`spec.image "${spec.image}" is not a valid image reference`);
  errors.push(...validateModelSource(spec));
  const r = spec.resources;
  if (!r) {
    errors.push('spec.resources is required');
  } else {
    for (const key of ['cpu', 'memory'] as const) {
      const given = r[key];
      if (typeof given === 'number' && !Number.isInteger(given)) {
        errors.push(`spec.resources.${key} must be a whole number or a quantity string such as "0.5", got ${given}`);
        continue;
      }
      // A whole number is a quantity, as in a Pod.
      const value = typeof given === 'number' ? String(given) : given;
      if (typeof value !== 'string' || value === '') {
        errors.push(`spec.resources.${key} is required`);
        continue;
      }
      const parsed = parseQuantity(value);
      if (parsed === undefined)
        errors.push(
          `spec.resources.${key} "${value}" is not a resource quantity (e.g. ${key === 'cpu' ? '500m or 2' : '512Mi or 4Gi'})`,
        );
      else if (parsed <= 0) errors.push(`spec.resources.${key} must be greater than zero, got "${value}"`);
    }
    if (r.gpu !== undefined && (!Number.isInteger(r.gpu) || r.gpu < 0))
      errors.push(`spec.resources.gpu must be a whole number >= 0, got ${r.gpu}`);
  }
  const min = spec.minReplicas ?? 1;
  const max = spec.maxReplicas ?? 1;
  if (!Number.isInteger(min) || min < 1) errors.push(`spec.minReplicas must be a whole number >= 1, got ${min}`);
  if (!Number.isInteger(max) || max < 1) errors.push(`spec.maxReplicas must be a whole number >= 1, got ${max}`);
  if (spec.replicas !== undefined && (!Number.isInteger(spec.replicas) || spec.replicas < 1))
    errors.push(`spec.replicas must be a whole number >= 1, got ${spec.replicas}`);
  if (min > max) errors.push(`spec.minReplicas (${min}) must not exceed spec.maxReplicas (${max})`);
  if (spec.endpointType !== undefined && spec.endpointType !== 'REST' && spec.endpointType !== 'gRPC') {
    errors.push(`spec.endpointType must be REST or gRPC, got "${String(spec.endpointType)}"`);
  }
  errors.push(...validateGateway(spec.gateway));
  return errors;
}

/** Everything the operator checks of a model before it acts: its name, its spec, its rollout plan. */
export function validateModel(name: string, spec: Partial<MachineModelSpec> | undefined): string[] {
  return [...validateName(name), ...validateSpec(spec), ...(spec ? validateRollout(spec.rollout, name) : [])];
}
