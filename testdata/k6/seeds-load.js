// The seeds' stepped load test as k6 runs it (parameters from the method's description):
// constant arrivals at TARGET_RPS per second for DURATION, 50 pre-allocated and at most 500
// virtual users, no connection reuse, non-streaming POST /v1/completions with max_tokens 100,
// temperature 0.7, and a prompt that starts with one random word out of 15 (to defeat prefix
// caching).
import http from 'k6/http';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8000';
const MODEL = __ENV.MODEL || 'mistralai/Ministral-3-8B-Instruct-2512';
const WORDS = ['cloud', 'server', 'network', 'storage', 'compute', 'container', 'cluster',
  'service', 'database', 'security', 'platform', 'system', 'resource', 'instance', 'workload'];

export const options = {
  noConnectionReuse: true,
  scenarios: {
    load: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.TARGET_RPS || 10),
      timeUnit: '1s',
      duration: __ENV.DURATION || '60s',
      preAllocatedVUs: 50,
      maxVUs: 500,
    },
  },
};

export default function () {
  const word = WORDS[Math.floor(Math.random() * WORDS.length)];
  const body = JSON.stringify({
    model: MODEL,
    prompt: `Starting with the word "${word}", write a brief technical explanation about cloud computing concepts. Cover containerization, orchestration, and scalability in about 80 words.`,
    max_tokens: 100,
    temperature: 0.7,
  });
  http.post(`${BASE}/v1/completions`, body, {
    headers: { 'Content-Type': 'application/json' },
    timeout: '240s',
  });
}
