// Reading one Caddy server's requests from Caddy's own metrics text (captured from Caddy 2.11.7).
import { describe, expect, it } from 'vitest';
import { serverTraffic } from '../../activities/gateway/caddy-metrics.js';

const metrics = `# HELP caddy_config_last_reload_success_timestamp_seconds Timestamp of the last successful configuration reload.
# TYPE caddy_config_last_reload_success_timestamp_seconds gauge
caddy_config_last_reload_success_timestamp_seconds 1.7955841565604982e+09
caddy_http_request_duration_seconds_bucket{code="200",handler="reverse_proxy",method="GET",server="m.canary",le="+Inf"} 75
caddy_http_request_duration_seconds_count{code="200",handler="reverse_proxy",method="GET",server="models"} 75
caddy_http_request_duration_seconds_count{code="502",handler="reverse_proxy",method="GET",server="models"} 25
caddy_http_request_duration_seconds_count{code="200",handler="reverse_proxy",method="GET",server="m.canary"} 75
caddy_http_request_duration_seconds_count{code="502",handler="reverse_proxy",method="GET",server="m.canary"} 20
caddy_http_request_duration_seconds_count{code="503",handler="reverse_proxy",method="POST",server="m.canary"} 5
caddy_http_request_duration_seconds_count{code="404",handler="reverse_proxy",method="GET",server="m.canary"} 3
caddy_http_request_duration_seconds_count{code="500",handler="reverse_proxy",method="GET",server="m.canary-other"} 9
caddy_http_requests_total{handler="reverse_proxy",server="m.canary"} 103
`;

describe("a Caddy server's requests from its metrics", () => {
  it('counts every code of that server alone, 5xx as errors, and when the counting began', () => {
    expect(serverTraffic(metrics, 'm.canary')).toEqual({ requests: 103, errors: 25, countedSince: 1795584156.5604982 });
  });

  it('is zero for a server that answered nothing since the last reload', () => {
    expect(serverTraffic(metrics, 'absent')).toEqual({ requests: 0, errors: 0, countedSince: 1795584156.5604982 });
  });
});
