"""The simulator tried as a new user tries a vLLM server: with the OpenAI Python SDK.

Usage: python3 openai_sdk.py BASE_URL AUTO_TOOLS_BASE_URL

BASE_URL serves a plain `inferscale sim`; AUTO_TOOLS_BASE_URL one started with
`--enable-auto-tool-choice --tool-call-parser hermes`. Every check raises with what it saw;
the last line printed is a JSON summary the Rust test reads.
"""

import json
import sys
import urllib.request

import openai

base, auto_base = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
auto_client = openai.OpenAI(base_url=auto_base + "/v1", api_key="unused", max_retries=0)
model = client.models.list().data[0].id
summary = {}

LONG = " ".join(["Describe how a cluster scheduler places containers on nodes."] * 6)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def metric(url, name):
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


# n > 1: parallel samples over one prompt; the prompt is counted once, its blocks shared.
hits_before = metric(base, "vllm:prefix_cache_hits_total")
r = client.completions.create(model=model, prompt=LONG, max_tokens=12, n=4)
check(sorted(c.index for c in r.choices) == [0, 1, 2, 3], f"four choices: {r.choices}")
texts = [c.text for c in r.choices]
check(len(set(texts)) == 4, f"four different samples: {texts}")
check(r.usage.completion_tokens == 4 * 12, f"completion tokens summed: {r.usage}")
check(r.usage.prompt_tokens < r.usage.completion_tokens + 200, f"prompt counted once: {r.usage}")
hits = metric(base, "vllm:prefix_cache_hits_total") - hits_before
check(hits >= 3 * 48, f"the other samples hit the first one's prompt blocks: {hits}")
summary["n_prefix_hits"] = hits

chunks = list(
    client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Say something."}],
        max_tokens=5,
        n=2,
        stream=True,
        stream_options={"include_usage": True},
    )
)
by_index = {0: "", 1: ""}
finished = {}
for ch in chunks:
    for c in ch.choices:
        by_index[c.index] += c.delta.content or ""
        if c.finish_reason:
            finished[c.index] = c.finish_reason
check(finished == {0: "length", 1: "length"}, f"both streams finish: {finished}")
check(all(by_index.values()) and by_index[0] != by_index[1], f"two streamed samples: {by_index}")
check(chunks[-1].usage.completion_tokens == 10, f"usage sums both: {chunks[-1].usage}")

try:
    client.completions.create(model=model, prompt="hi", max_tokens=2, n=1000)
    raise AssertionError("n=1000 was accepted")
except openai.BadRequestError as e:
    check("at most" in str(e), f"n too large names the bound: {e}")

# stop: the text ends before the stop string, finish_reason stop, stop_reason the string.
free = client.completions.create(model=model, prompt="Tell me about clouds.", max_tokens=40)
word = free.choices[0].text.split()[5]
r = client.completions.create(
    model=model, prompt="Tell me about clouds.", max_tokens=40, stop=[word, "zzz-never"]
)
c = r.choices[0]
check(c.finish_reason == "stop", f"finish_reason stop: {c}")
check(word not in c.text and free.choices[0].text.startswith(c.text), f"cut before {word!r}: {c.text!r}")
check(c.model_extra.get("stop_reason") == word, f"stop_reason is the string: {c.model_extra}")
check(r.usage.completion_tokens < 40, f"fewer tokens generated (and simulated): {r.usage}")
summary["stop_tokens"] = r.usage.completion_tokens

streamed = ""
last = None
for ch in client.completions.create(
    model=model, prompt="Tell me about clouds.", max_tokens=40, stop=word, stream=True
):
    for c in ch.choices:
        streamed += c.text
        last = c.finish_reason or last
check(streamed == r.choices[0].text and last == "stop", f"streamed stop: {streamed!r} {last}")

# logprobs: completions (an integer) and chat (logprobs + top_logprobs).
r = client.completions.create(model=model, prompt="Hello", max_tokens=6, logprobs=3)
lp = r.choices[0].logprobs
check(len(lp.tokens) == 6 and "".join(lp.tokens) == r.choices[0].text, f"tokens: {lp}")
check(all(x <= 0 for x in lp.token_logprobs), f"log probabilities are <= 0: {lp.token_logprobs}")
check(all(len(t) == 3 for t in lp.top_logprobs), f"three alternatives each: {lp.top_logprobs}")
check(lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0, f"offsets: {lp.text_offset}")

r = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Hello"}],
    max_tokens=5,
    logprobs=True,
    top_logprobs=2,
)
content = r.choices[0].logprobs.content
check(len(content) == 5, f"one entry per token: {content}")
for e in content:
    check(e.logprob <= 0 and bytes(e.bytes).decode() == e.token, f"entry: {e}")
    check(len(e.top_logprobs) == 2 and e.top_logprobs[0].token == e.token, f"top: {e.top_logprobs}")
check("".join(e.token for e in content) == r.choices[0].message.content, "tokens make the text")

for bad in ({"logprobs": True, "top_logprobs": 21}, {"top_logprobs": 2}):
    try:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "x"}], max_tokens=2, **bad
        )
        raise AssertionError(f"{bad} was accepted")
    except openai.BadRequestError:
        pass

# tools: required, named, auto (refused without the server flags, served with them).
tools = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer"},
                },
                "required": ["city"],
            },
        },
    }
]
messages = [{"role": "user", "content": "What is the weather in Paris?"}]
r = client.chat.completions.create(
    model=model, messages=messages, tools=tools, tool_choice="required", max_tokens=200
)
c = r.choices[0]
check(c.finish_reason == "tool_calls", f"required: finish_reason tool_calls: {c}")
call = c.message.tool_calls[0]
args = json.loads(call.function.arguments)
check(call.function.name == "get_weather" and isinstance(args["city"], str), f"call: {call}")
check(args["unit"] in ("celsius", "fahrenheit") and isinstance(args["days"], int), f"args: {args}")
check(r.usage.completion_tokens >= 8, f"the call's tokens are generated: {r.usage}")
summary["tool_call_tokens"] = r.usage.completion_tokens

r = client.chat.completions.create(
    model=model,
    messages=messages,
    tools=tools,
    tool_choice={"type": "function", "function": {"name": "get_weather"}},
    max_tokens=200,
)
check(r.choices[0].finish_reason == "stop", f"named: finish_reason stop: {r.choices[0]}")
check(json.loads(r.choices[0].message.tool_calls[0].function.arguments)["city"], "named args")

streamed_args, name = "", None
for ch in client.chat.completions.create(
    model=model, messages=messages, tools=tools, tool_choice="required", max_tokens=200, stream=True
):
    for c in ch.choices:
        for tc in c.delta.tool_calls or []:
            name = tc.function.name or name
            streamed_args += tc.function.arguments or ""
check(name == "get_weather" and json.loads(streamed_args) == args, f"streamed call: {streamed_args!r}")

try:
    client.chat.completions.create(model=model, messages=messages, tools=tools, max_tokens=50)
    raise AssertionError("auto tool choice was served without --enable-auto-tool-choice")
except openai.BadRequestError as e:
    check("--enable-auto-tool-choice" in str(e), f"vLLM's message: {e}")

r = auto_client.chat.completions.create(model=model, messages=messages, tools=tools, max_tokens=200)
c = r.choices[0]
check(c.finish_reason == "tool_calls" and c.message.content is None, f"auto calls: {c}")
follow = messages + [
    {"role": "assistant", "content": None, "tool_calls": [c.message.tool_calls[0].model_dump()]},
    {"role": "tool", "tool_call_id": c.message.tool_calls[0].id, "content": "sunny, 21 C"},
]
r = auto_client.chat.completions.create(model=model, messages=follow, tools=tools, max_tokens=8)
check(r.choices[0].message.content and not r.choices[0].message.tool_calls, f"answers after the result: {r}")

print(json.dumps(summary))
