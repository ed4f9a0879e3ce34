"""show_vs_llama_cpp.py: the ratio table (Troupe / llama.cpp) of bench/run_vs_llama_cpp.sh's JSON
lines (stdin): per file, decode and pp64 at 1 / 2 threads and pp512 at 1 thread, each cell
"ratio (troupe / llama.cpp tok/s)"."""
import json
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
        cell.setdefault(name, {}).setdefault(col, {})[r["engine"]] = r[key]
cols = ["decode 1", "decode 2", "prefill 1", "prefill 2", "prefill512 1"]
print("| bench-134m | decode 1 thr | decode 2 thr | pp64 1 thr | pp64 2 thr | pp512 1 thr |")
print("|---|---|---|---|---|---|")
for name, c in cell.items():
    out = []
    for col in cols:
        v = c.get(col, {})
        if "troupe" in v and "llama.cpp" in v:
            out.append(f"**{v['troupe'] / v['llama.cpp']:.2f}** ({v['troupe']:.0f} / {v['llama.cpp']:.0f})")
        else:
            out.append("-")
    print(f"| {name} | " + " | ".join(out) + " |")
