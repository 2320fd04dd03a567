// Links into the Temporal Web UI. Pure.

/** A workflow's page in the Web UI; with `runId`, that run's event history. */
export function webUiLink(base: string, namespace: string, workflowId: string, runId?: string): string {
  const page = `${base.replace(/\/$/, '')}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
  return runId ? `${page}/${runId}/history` : page;
}
