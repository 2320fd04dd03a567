import { readFileSync } from 'node:fs';
import { componentKubeconfigArgs } from './kubeconfig.js';
import { metricsServerUser, type Pki } from './pki.js';

/**
 * metrics-server on the local cluster, so HorizontalPodAutoscalers can act. It scrapes kwok, which
 * serves each fake node's kubelet resource metrics from the pods' simulated usage: this annotation
 * (and `kwok.x-k8s.io/usage-memory`; kwok's default ClusterResourceUsage), 1m CPU when absent.
 */
export const cpuUsageAnnotation = 'kwok.x-k8s.io/usage-cpu';

/** Where kwok serves a fake node's kubelet resource metrics; metrics-server reads this node annotation. */
export function nodeMetricsAnnotation(nodeName: string): Record<string, string> {
  return { 'metrics.k8s.io/resource-metrics-path': `/metrics/nodes/${nodeName}/metrics/resource` };
}

export function metricsServerArgs(pki: Pki, kubeconfig: string, port: number): string[] {
  return [
    'metrics-server',
    '--bind-address',
    '127.0.0.1',
    '--secure-port',
    String(port),
    '--tls-cert-file',
    pki.metricsServer.cert,
    '--tls-private-key-file',
    pki.metricsServer.key,
    ...componentKubeconfigArgs(kubeconfig),
    // The fake node's address and port are kwok's, whose serving cert our CA signed.
    '--kubelet-preferred-address-types',
    'InternalIP',
    '--kubelet-use-node-status-port',
    '--kubelet-certificate-authority',
    pki.caCert,
    // Its minimum, above the request timeout: an autoscaler sees load change within two scrapes.
    '--metric-resolution',
    '10s',
    '--kubelet-request-timeout',
    '5s',
  ];
}

/** The aggregated API and the RBAC metrics-server needs, as upstream's manifests give them, for a local process. */
export function metricsServerObjects(pki: Pki, port: number): object {
  const user = { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: metricsServerUser };
  const ref = (kind: string, name: string) => ({ kind, name, apiGroup: 'rbac.authorization.k8s.io' });
  return {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'system:metrics-server' },
        rules: [
          { apiGroups: [''], resources: ['nodes/metrics'], verbs: ['get'] },
          { apiGroups: [''], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'system:metrics-server' },
        roleRef: ref('ClusterRole', 'system:metrics-server'),
        subjects: [user],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'metrics-server:system:auth-delegator' },
        roleRef: ref('ClusterRole', 'system:auth-delegator'),
        subjects: [user],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'metrics-server-auth-reader', namespace: 'kube-system' },
        roleRef: ref('Role', 'extension-apiserver-authentication-reader'),
        subjects: [user],
      },
      {
        // The apiserver proxies to an ExternalName Service's name and the APIService's port: this process.
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'metrics-server', namespace: 'kube-system' },
        spec: { type: 'ExternalName', externalName: '127.0.0.1' },
      },
      {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: { name: 'v1beta1.metrics.k8s.io' },
        spec: {
          service: { name: 'metrics-server', namespace: 'kube-system', port },
          group: 'metrics.k8s.io',
          version: 'v1beta1',
          caBundle: readFileSync(pki.caCert).toString('base64'),
          groupPriorityMinimum: 100,
          versionPriority: 100,
        },
      },
    ],
  };
}
