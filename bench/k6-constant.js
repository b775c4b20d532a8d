// k6's best shot at a fast open-loop load, for bench/loadgen.sh: constant arrivals at RATE per
// second for DURATION, VUS pre-allocated and MAX_VUS at most (iterations past that are
// dropped), connection reuse on (k6's default), response bodies discarded (less work for k6),
// the same non-streaming completion request inferscale sends.
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8000';
const BODY = JSON.stringify({
  model: __ENV.MODEL || 'm',
  prompt: __ENV.PROMPT || 'Say hello.',
  max_tokens: Number(__ENV.MAX_TOKENS || 16),
});

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
  scenarios: {
    load: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 1000),
      timeUnit: '1s',
      duration: __ENV.DURATION || '10s',
      preAllocatedVUs: Number(__ENV.VUS || 100),
      maxVUs: Number(__ENV.MAX_VUS || 1000),
    },
  },
};

export default function () {
  http.post(`${BASE}/v1/completions`, BODY, {
    headers: { 'Content-Type': 'application/json' },
    timeout: '10s',
  });
}
