"""show_fusion_ab.py: summarises bench/results/fusion_pass_ab.jsonl (bench/run_fusion_ab.sh):
per KV cache type and prompt length, the median over rounds of the decode step split into weight matmuls,
paged attention over the cache, and the rest (norms, rope, cache writes, activations, adds),
fused against unfused."""
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else
                                    "bench/results/fusion_pass_ab.jsonl")]


def split(j):
    mm = att = rest = 0.0
    for k in j["decode_profile"]:
        us = k["us_per_step"]
        if k["weight_matmul"]:
            mm += us
        elif "paged_attention" in k["kernel"]:
            att += us
        else:
            rest += us
    return {"step": j["decode_us_per_token"], "matmul": mm, "attention": att, "rest": rest,
            "not_matmul": att + rest}


for kv, p in sorted({(j.get("kv", "f32"), j["prompt_tokens"]) for j in rows}):
    med = {}
    for v in ("fused", "unfused"):
        s = [split(j) for j in rows
             if j["prompt_tokens"] == p and j["variant"] == v and j.get("kv", "f32") == kv]
        med[v] = {k: statistics.median(x[k] for x in s) for k in s[0]}
        med[v]["n"] = len(s)
    f, u = med["fused"], med["unfused"]
    print(f"{kv} KV cache, prompt {p}, {f['n']} rounds (medians, us per decode step): "
          "fused / unfused / speed-up")
    for k in ("step", "matmul", "not_matmul", "attention", "rest"):
        print(f"  {k:11s} {f[k]:9.1f} {u[k]:9.1f}  x{u[k] / f[k]:.2f}")
