// Readable Kubernetes API errors. The client's own message dumps the whole response (headers included).
import { ApiException } from '@kubernetes/client-node';

/** The HTTP status of a failed API call, or undefined for network errors. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** The apiserver's own message (metav1.Status.message) rather than the client's dump of the response. */
export function apiMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = typeof err.body === 'string' ? safeParse(err.body) : err.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    return typeof message === 'string' ? `${message} (HTTP ${err.code})` : `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}
