// Readable Kubernetes API errors. The client's own message dumps the whole response (headers included).
import { ApiException } from '@kubernetes/client-node';

/** The HTTP status of a failed API call, or undefined for network errors. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** The apiserver's own message (metav1.Status.message) rather than the client's dump of the response. */
export function apiMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const message = statusOf(err)?.message;
    return typeof message === 'string' ? `${message} (HTTP ${err.code})` : `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * Refused because the namespace is being deleted: the apiserver's NamespaceLifecycle admission adds
 * the cause `NamespaceTerminating` (StatusCause.Type, serialised as `reason`) to its 403.
 */
export function isNamespaceTerminating(err: unknown): boolean {
  if (!(err instanceof ApiException) || err.code !== 403) return false;
  return statusOf(err)?.details?.causes?.some((c) => c.reason === 'NamespaceTerminating') ?? false;
}

/** The metav1.Status the apiserver answered with, as far as we read it. */
interface ApiStatus {
  message?: unknown;
  details?: { causes?: { reason?: string }[] };
}

function statusOf(err: ApiException<unknown>): ApiStatus | undefined {
  return (typeof err.body === 'string' ? safeParse(err.body) : err.body) as ApiStatus | undefined;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}
