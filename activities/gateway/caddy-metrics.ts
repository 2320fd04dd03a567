// Reading the canary's requests from Caddy's Prometheus metrics. Pure. Only the two series the
// analysis needs are read, so a few lines of matching stand in for a full exposition-format parser.
import type { TrafficSample } from '../../src/core/rollout.js';

const labelPattern = /(\w+)="((?:[^"\\]|\\.)*)"/g;

function labels(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [, name, value] of text.matchAll(labelPattern)) out[name!] = value!.replace(/\\(.)/g, '$1');
  return out;
}

/**
 * The requests one Caddy server answered and how many of them with a 5xx code, since Caddy last
 * loaded its config (every config change reloads it and starts its HTTP metrics from zero).
 */
export function serverTraffic(metrics: string, server: string): TrafficSample {
  const sample: TrafficSample = { requests: 0, errors: 0 };
  for (const line of metrics.split('\n')) {
    const counted = /^caddy_http_request_duration_seconds_count\{([^}]*)\} (\S+)$/.exec(line);
    if (counted) {
      const l = labels(counted[1]!);
      if (l.server !== server) continue;
      const n = Number(counted[2]);
      sample.requests += n;
      if (l.code?.startsWith('5')) sample.errors += n;
      continue;
    }
    const loaded = /^caddy_config_last_reload_success_timestamp_seconds (\S+)$/.exec(line);
    if (loaded) sample.countedSince = Number(loaded[1]);
  }
  return sample;
}
