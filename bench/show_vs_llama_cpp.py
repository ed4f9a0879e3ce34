"""show_vs_llama_cpp.py: the ratio table (Troupe / llama.cpp) of bench/run_vs_llama_cpp.sh's or
run_vs_llama_bench.sh's JSON lines (stdin, one run's file or several rounds' concatenated): per
file, decode and pp64 at 1 / 2 threads and pp512 at 1 thread. One round: each cell
"ratio (troupe / llama.cpp tok/s)"; several (the two engines alternate, so each round is a
pair): the median of the rounds' ratios, then each round's in order, "ratio (r1 / r2 / ...)"."""
import json
import statistics
import sys

rows = [json.loads(line) for line in sys.stdin if line.strip()]
cell = {}
for r in rows:
    name = r["model"].rsplit("/", 1)[-1].replace("bench-134m-", "").replace(".gguf", "")
    pp = r["pp"]
    t = r["threads"]
    for what, key in (("decode", "decode_tok_s"), ("prefill", "prefill_tok_s")):
        if pp == 512 and what == "decode":
            continue
        col = f"{what}{'' if pp == 64 else pp} {t}"
        cell.setdefault(name, {}).setdefault(col, {}).setdefault(r["engine"], []).append(r[key])
cols = ["decode 1", "decode 2", "prefill 1", "prefill 2", "prefill512 1"]
print("| bench-134m | decode 1 thr | decode 2 thr | pp64 1 thr | pp64 2 thr | pp512 1 thr |")
print("|---|---|---|---|---|---|")
for name, c in cell.items():
    out = []
    for col in cols:
        v = c.get(col, {})
        ours, theirs = v.get("troupe", []), v.get("llama.cpp", [])
        if not ours or not theirs:
            out.append("-")
            continue
        if len(ours) == 1 and len(theirs) == 1:
            out.append(f"**{ours[0] / theirs[0]:.2f}** ({ours[0]:.0f} / {theirs[0]:.0f})")
        else:
            ratios = [a / b for a, b in zip(ours, theirs)]
            rounds = " / ".join(f"{r:.2f}" for r in ratios)
            out.append(f"**{statistics.median(ratios):.2f}** ({rounds})")
    print(f"| {name} | " + " | ".join(out) + " |")
