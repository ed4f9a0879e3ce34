"""http_load.py: HTTP load driver for `troupe serve` (or any OpenAI-style server, as
llama-server, with --url). Holds N concurrent streaming clients (default 200) for D seconds
(default 30); each sends /v1/completions with stream=true back to back and reads the
server-sent events to [DONE]. Reports requests/s, tokens/s, time to first token, request
latency and the gap between a stream's tokens (inter-token latency) p50/p99/max, errors, and
incomplete streams. Starts the server itself unless --url is given. Exit status 1 when any
request failed or a stream was cut.

  build/pyenv/bin/python bench/http_load.py --troupe build/cli/troupe [--clients 200]
      [--seconds 30] [--max-tokens 32] [--json bench/results/http_load.json]
  ... --url http://127.0.0.1:PORT --prompt-tokens 64 --ignore-eos   # token-id prompts of a
      fixed length and a fixed number of tokens back, the same for any server; --reconnect:
      a connection per request (llama-server closes each after its stream)
"""
import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from serve_util import Server  # noqa: E402

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park", "Tom had a big red ball.",
           "One day, a cat", "Sam wanted to fly", "The sun was shining and", "In a small house there lived"]


def pct(values, p):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


async def read_chunked_lines(reader):
    """Yields the lines of a chunked HTTP body as they arrive."""
    pending = b""
    while True:
        size = int((await reader.readline()).strip(), 16)
        if size == 0:
            await reader.readline()
            if pending:
                yield pending.decode()
            return
        pending += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode()


def request_body(i, k, opts):
    """Client i's k-th request: a text prompt, or prompt_tokens random ids (seeded by i, k)."""
    if opts.prompt_tokens:
        rng = random.Random(i * 100003 + k)
        prompt = [rng.randrange(opts.token_low, opts.token_high) for _ in range(opts.prompt_tokens)]
    else:
        prompt = PROMPTS[(i + k) % len(PROMPTS)]
    body = {"model": opts.model, "prompt": prompt, "max_tokens": opts.max_tokens, "temperature": 0,
            "stream": True}
    if opts.ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body).encode()


async def client(i, url, deadline, opts, stats):
    host, port = url.split("//")[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    k = 0
    while time.monotonic() < deadline:
        body = request_body(i, k, opts)
        k += 1
        t0 = time.monotonic()
        if opts.reconnect and k > 1:  # a server that closes after each stream (llama-server)
            writer.close()
            reader, writer = await asyncio.open_connection(host, int(port))
        first = None
        last = None
        gaps = []
        chunks = 0
        done = False
        finish = None
        try:
            writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            headers = {}
            while True:
                line = (await reader.readline()).decode().strip()
                if not line:
                    break
                name, _, value = line.partition(":")
                headers[name.lower()] = value.strip()
            if status != 200:
                await reader.readexactly(int(headers.get("content-length", "0")))
                stats["errors"].append(f"status {status}")
                continue
            async for line in read_chunked_lines(reader):
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    continue
                choices = json.loads(data).get("choices") or []
                if not choices:  # a usage or timings chunk (llama-server) carries no text
                    continue
                c = choices[0]
                if c.get("text"):
                    chunks += 1
                    now = time.monotonic()
                    if first is None:
                        first = now - t0
                    else:
                        gaps.append(now - last)
                    last = now
                finish = c.get("finish_reason") or finish
        except Exception as e:  # noqa: BLE001 - counted and reported
            stats["errors"].append(repr(e))
            writer.close()
            reader, writer = await asyncio.open_connection(host, int(port))
            continue
        if not done or finish is None:
            stats["incomplete"] += 1
            continue
        stats["requests"] += 1
        stats["tokens"] += chunks
        stats["latency"].append(time.monotonic() - t0)
        stats["itl"].extend(gaps)
        if first is not None:
            stats["ttft"].append(first)
    writer.close()


async def run(url, opts):
    stats = {"requests": 0, "tokens": 0, "incomplete": 0, "errors": [], "latency": [], "ttft": [], "itl": []}
    deadline = time.monotonic() + opts.seconds
    t0 = time.monotonic()
    await asyncio.gather(*(client(i, url, deadline, opts, stats) for i in range(opts.clients)))
    stats["elapsed"] = time.monotonic() - t0
    return stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--troupe", default="build/cli/troupe")
    ap.add_argument("--url")
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=0, help="random token-id prompts of this length")
    ap.add_argument("--token-low", type=int, default=100, help="the ids' range [low, high)")
    ap.add_argument("--token-high", type=int, default=20000)
    ap.add_argument("--ignore-eos", action="store_true", help="ask for max_tokens tokens past EOS")
    ap.add_argument("--model", default="stories")
    ap.add_argument("--reconnect", action="store_true", help="a new connection for every request")
    ap.add_argument("--json")
    args = ap.parse_args()
    server = None
    url = args.url
    if not url:
        server = Server(args.troupe, "--max-waiting", "100000")
        url = server.url
    try:
        s = asyncio.run(run(url, args))
    finally:
        if server:
            server.stop()
    result = {
        "command": " ".join(sys.argv), "clients": args.clients, "seconds": s["elapsed"], "requests": s["requests"],
        "errors": len(s["errors"]), "first_errors": s["errors"][:5], "incomplete_streams": s["incomplete"],
        "requests_per_s": s["requests"] / s["elapsed"], "tokens_per_s": s["tokens"] / s["elapsed"],
        "ttft_p50_ms": 1e3 * pct(s["ttft"], 0.5), "ttft_p99_ms": 1e3 * pct(s["ttft"], 0.99),
        "latency_p50_ms": 1e3 * pct(s["latency"], 0.5), "latency_p99_ms": 1e3 * pct(s["latency"], 0.99),
        "itl_p50_ms": 1e3 * pct(s["itl"], 0.5), "itl_p99_ms": 1e3 * pct(s["itl"], 0.99),
        "itl_max_ms": 1e3 * max(s["itl"], default=0.0),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    sys.exit(1 if result["errors"] or result["incomplete_streams"] else 0)


if __name__ == "__main__":
    main()
