// The Gateway API CRDs, from the pinned sigs.k8s.io/gateway-api Go module (its config/crd/standard).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { PrerequisiteError } from './install.js';

export const gatewayApiVersion = 'v1.6.3';
const crds = ['gatewayclasses', 'gateways', 'httproutes', 'referencegrants'];

/** Paths of the standard-channel CRD files, downloaded into the Go module cache on first use. */
export function gatewayApiCrdFiles(): string[] {
  let out: string;
  try {
    out = execFileSync('go', ['mod', 'download', '-json', `sigs.k8s.io/gateway-api@${gatewayApiVersion}`], {
      encoding: 'utf8',
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PrerequisiteError('the Go toolchain is needed to fetch the Gateway API CRDs: install Go 1.26+');
    }
    throw err;
  }
  const dir = (JSON.parse(out) as { Dir: string }).Dir;
  return crds.map((c) => path.join(dir, 'config', 'crd', 'standard', `gateway.networking.k8s.io_${c}.yaml`));
}
