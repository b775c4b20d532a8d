#!/usr/bin/env python3
"""Writes the hand-made fixtures in testdata/ (run from the repository root).

- vllm/metrics_v0_9.prom: what a vLLM 0.9.x V1 server exposes, written from the renames
  table (METRICS.md section 1.7): the deprecated `gpu_cache_usage_perc`,
  `gpu_prefix_cache_*` and `time_per_output_token_seconds` names, no `inter_token_latency`,
  no `request_time_per_output_token`, finish reasons stop/length/abort. Values synthetic.
- dcgm/node-8gpu.prom: an 8x H100 node's dcgm-exporter 4.x output with the default counters
  (plus the ECC single-bit volatile counter many clusters enable), labels in the exporter's
  render order, `Hostname` as released exporters write it, Kubernetes mapping on.
- traces/chat-sessions.jsonl: a Mooncake-format trace of multi-turn chat (see chat_trace).
"""
import json
import math
import os
import random

rng = random.Random(7)


def pyfloat(v):
    """prometheus_client's number style."""
    if v != v:
        return "NaN"
    if v == float("inf"):
        return "+Inf"
    s = repr(float(v))
    dot = s.find(".")
    if v > 0 and dot > 6:
        mant = (s[0] + "." + s[1:dot] + s[dot + 1:]).rstrip("0.")
        return f"{mant}e+{dot - 1:02d}"
    return s


def vllm_v09():
    model = "meta-llama/Llama-3.1-8B-Instruct"
    lab = f'engine="0",model_name="{model}"'
    out = []

    def fam(name, typ, help_):
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {typ}")

    def hist(name, help_, bounds, draw, n):
        fam(name, "histogram", help_)
        obs = [draw() for _ in range(n)]
        for b in bounds + [float("inf")]:
            c = sum(1 for o in obs if o <= b)
            le = "+Inf" if b == float("inf") else pyfloat(b)
            out.append(f'{name}_bucket{{engine="0",le="{le}",model_name="{model}"}} {pyfloat(c)}')
        out.append(f"{name}_count{{{lab}}} {pyfloat(n)}")
        out.append(f"{name}_sum{{{lab}}} {pyfloat(round(sum(obs), 6))}")
        fam(name + "_created", "gauge", help_)
        out.append(f"{name}_created{{{lab}}} 1.7495e+09")

    fam("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
    out.append(f"vllm:num_requests_running{{{lab}}} 41.0")
    fam("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
    out.append(f"vllm:num_requests_waiting{{{lab}}} 3.0")
    fam("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.")
    out.append(f"vllm:gpu_cache_usage_perc{{{lab}}} 0.3125")
    fam("vllm:gpu_prefix_cache_queries_total", "counter", "GPU prefix cache queries, in terms of number of queried tokens.")
    out.append(f"vllm:gpu_prefix_cache_queries_total{{{lab}}} 1.0234e+06")
    fam("vllm:gpu_prefix_cache_hits_total", "counter", "GPU prefix cache hits, in terms of number of cached tokens.")
    out.append(f"vllm:gpu_prefix_cache_hits_total{{{lab}}} 212992.0")
    fam("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.")
    out.append(f"vllm:num_preemptions_total{{{lab}}} 17.0")
    fam("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
    out.append(f"vllm:prompt_tokens_total{{{lab}}} 1.0234e+06")
    fam("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.")
    out.append(f"vllm:generation_tokens_total{{{lab}}} 412000.0")
    fam("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for reason, n in [("stop", 3890.0), ("length", 212.0), ("abort", 18.0)]:
        out.append(f'vllm:request_success_total{{engine="0",finished_reason="{reason}",model_name="{model}"}} {pyfloat(n)}')
    n = 4102
    tok = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok, lambda: rng.randint(150, 400), n)
    hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tok, lambda: rng.randint(60, 140), n)
    it = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", it, lambda: rng.choice([38, 41, 44, 300, 2048]), 9000)
    ttft = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft, lambda: rng.lognormvariate(-3.2, 0.5), n)
    tpot = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
    hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpot, lambda: rng.lognormvariate(-3.6, 0.2), 400000)
    lat = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
    hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lat, lambda: rng.lognormvariate(0.9, 0.25), n)
    hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", lat, lambda: rng.expovariate(40), n)
    hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", lat, lambda: rng.lognormvariate(0.85, 0.25), n)
    hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", lat, lambda: rng.lognormvariate(-3.5, 0.5), n)
    hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", lat, lambda: rng.lognormvariate(0.8, 0.25), n)
    return "\n".join(out) + "\n"


def dcgm_node():
    fields = []
    for line in open("testdata/dcgm/default-counters.csv"):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        f, t, h = [x.strip() for x in s.split(",", 2)]
        fields.append((f, t, h))
    # Insert the ECC counter after the memory fields, as clusters that enable it do.
    fields.insert(15, ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."))
    gpus = []
    for i in range(8):
        util = rng.choice([31, 38, 44, 52, 47, 35, 0, 41])
        gpus.append({
            "idx": i,
            "uuid": "GPU-%08x-%04x-%04x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(48)),
            "bus": "00000000:%02X:00.0" % [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB][i],
            "util": util,
            "pod": "" if util == 0 else f"vllm-llama-8b-{i}",
        })
    out = []
    for f, t, h in fields:
        if t == "label":
            continue
        out.append(f"# HELP {f} {h}")
        out.append(f"# TYPE {f} {t}")
        for g in gpus:
            busy = g["util"] / 100
            v = {
                "DCGM_FI_DEV_SM_CLOCK": 1980 if busy else 345,
                "DCGM_FI_DEV_MEM_CLOCK": 2619,
                "DCGM_FI_DEV_MEMORY_TEMP": 41 + int(12 * busy),
                "DCGM_FI_DEV_GPU_TEMP": 33 + int(20 * busy),
                "DCGM_FI_DEV_POWER_USAGE": "%.6f" % (72.5 + 420 * busy + rng.random()),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 81234567890 + g["idx"] * 12345,
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
                "DCGM_FI_DEV_GPU_UTIL": g["util"],
                "DCGM_FI_DEV_MEM_COPY_UTIL": int(g["util"] * 0.9),
                "DCGM_FI_DEV_ENC_UTIL": 0,
                "DCGM_FI_DEV_DEC_UTIL": 0,
                "DCGM_FI_DEV_XID_ERRORS": 0,
                "DCGM_FI_DEV_FB_FREE": 81079 - (73140 if busy else 0) - 587,
                "DCGM_FI_DEV_FB_USED": (73140 if busy else 0) + 4,
                "DCGM_FI_DEV_FB_RESERVED": 583,
                "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 2 if g["idx"] == 5 else 0,
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 0,
                "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
                "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "%.6f" % (busy * 0.95),
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "%.6f" % (busy * 0.21),
                "DCGM_FI_PROF_DRAM_ACTIVE": "%.6f" % (busy * 0.74),
                "DCGM_FI_PROF_PCIE_TX_BYTES": int(1.2e6 * busy) + 40312,
                "DCGM_FI_PROF_PCIE_RX_BYTES": int(3.4e6 * busy) + 61204,
            }[f]
            labels = (f'gpu="{g["idx"]}",UUID="{g["uuid"]}",pci_bus_id="{g["bus"]}",device="nvidia{g["idx"]}",'
                      f'modelName="NVIDIA H100 80GB HBM3",Hostname="ip-10-0-42-17.ec2.internal",'
                      f'DCGM_FI_DRIVER_VERSION="570.124.06",container="{"vllm" if g["pod"] else ""}",'
                      f'namespace="{"inference" if g["pod"] else ""}",pod="{g["pod"]}"')
            out.append(f"{f}{{{labels}}} {v}")
    return "\n".join(out) + "\n"


def chat_trace():
    """A Mooncake-format trace of chat conversations (AIPerf's session_id and delay too):
    conversations start as a Poisson process (0.5/s for 240 s), each on one of four 1024-token
    system prompts, with 1 to 8 turns; a turn's context is the one before, its answer and a new
    user message, so its full 512-token blocks keep their ids and the rest get new ones. The
    recorded timestamps assume a server answering in 0.3 s + 25 ms a token, then the user's
    think time (exponential, mean 8 s)."""
    r = random.Random(37)
    block = 512
    next_id = [8]  # ids 0..7: the four system prompts' two blocks each

    def fresh():
        next_id[0] += 1
        return next_id[0] - 1

    rows = []
    t = 0.0
    c = 0
    while True:
        t += r.expovariate(0.5)
        if t > 240:
            break
        c += 1
        system = r.randrange(4)
        ids = [2 * system, 2 * system + 1]
        context = 2 * block
        turns = min(8, 1 + int(r.expovariate(1 / 2.2)))
        at = t
        delay = 0.0
        for k in range(turns):
            user = max(16, int(r.lognormvariate(math.log(200), 0.8)))
            before = context
            context += user
            full = before // block  # blocks that were full before this turn keep their ids
            ids = ids[:full]
            while len(ids) < -(-context // block):
                ids.append(fresh())
            out = max(1, min(2048, int(r.lognormvariate(math.log(150), 0.7))))
            row = {"timestamp": int(at * 1000), "input_length": context,
                   "output_length": out, "hash_ids": list(ids), "session_id": f"c{c}"}
            if k > 0:
                row["delay"] = int(delay * 1000)
            rows.append(row)
            context += out
            delay = r.expovariate(1 / 8.0)
            at += 0.3 + 0.025 * out + delay
    rows.sort(key=lambda x: x["timestamp"])
    return "".join(json.dumps(x) + "\n" for x in rows)


def agent_trace():
    """A trace of tool-using agents with branches (the `id`, `parent` and `parents` fields
    inferscale reads beside Mooncake's): sessions start as a Poisson process (0.2/s for
    180 s). Each is a planner request (a 2048-token agent system prompt shared by all, then a
    task), which fans out into 2 to 4 tool calls; each call continues the planner's context
    (its prompt, its answer) with a tool result, sent 0.1 to 1 s after the planner ends; then
    a join that waits for every call and continues the planner's context with all their
    results. Timestamps assume a server answering in 0.3 s + 25 ms a token."""
    r = random.Random(41)
    block = 512
    next_id = [4]  # ids 0..3: the system prompt's four blocks

    def fresh():
        next_id[0] += 1
        return next_id[0] - 1

    def extend(ids, before, after):
        ids = ids[: before // block]  # blocks full before keep their ids
        while len(ids) < -(-after // block):
            ids.append(fresh())
        return ids

    rows = []
    t = 0.0
    s = 0
    while True:
        t += r.expovariate(0.2)
        if t > 180:
            break
        s += 1
        task = max(32, int(r.lognormvariate(math.log(300), 0.5)))
        context = 4 * block + task
        ids = extend([0, 1, 2, 3], 4 * block, context)
        plan_out = max(16, int(r.lognormvariate(math.log(200), 0.5)))
        rows.append({"id": f"s{s}-plan", "timestamp": int(t * 1000), "input_length": context,
                     "output_length": plan_out, "hash_ids": list(ids), "session_id": f"s{s}"})
        planned_end = t + 0.3 + 0.025 * plan_out
        base = context + plan_out
        # The planner's prompt and answer, which every call and the join carry.
        base_ids = extend(list(ids), context, base)
        calls = []
        for k in range(r.randint(2, 4)):
            result = max(32, int(r.lognormvariate(math.log(400), 0.6)))
            delay = r.uniform(0.1, 1.0)
            at = planned_end + delay
            out = max(8, int(r.lognormvariate(math.log(80), 0.5)))
            call_ids = extend(list(base_ids), base, base + result)
            name = f"s{s}-tool{k}"
            rows.append({"id": name, "parent": f"s{s}-plan", "timestamp": int(at * 1000),
                         "input_length": base + result, "output_length": out,
                         "hash_ids": call_ids, "delay": int(delay * 1000)})
            calls.append((name, result + out, at + 0.3 + 0.025 * out))
        joined = base + sum(c[1] for c in calls)
        at = max(c[2] for c in calls) + 0.2
        out = max(32, int(r.lognormvariate(math.log(250), 0.5)))
        rows.append({"id": f"s{s}-join", "parents": [c[0] for c in calls],
                     "timestamp": int(at * 1000), "input_length": joined, "output_length": out,
                     "hash_ids": extend(list(base_ids), base, joined), "delay": 200})
    rows.sort(key=lambda x: x["timestamp"])
    return "".join(json.dumps(x) + "\n" for x in rows)


open("testdata/vllm/metrics_v0_9.prom", "w").write(vllm_v09())
os.makedirs("testdata/traces", exist_ok=True)
open("testdata/traces/chat-sessions.jsonl", "w").write(chat_trace())
open("testdata/traces/agent-branches.jsonl", "w").write(agent_trace())
open("testdata/dcgm/node-8gpu.prom", "w").write(dcgm_node())
