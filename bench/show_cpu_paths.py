"""show_cpu_paths.py: the markdown table of bench/run_cpu_paths.sh's JSON lines (stdin): per
dtype and ISA, decode and pp64 tok/s at 1 / 2 threads, pp512 at 1 thread, and the matmul
paths prefill and decode took."""
import json
import sys

rows = [json.loads(line) for line in sys.stdin if line.strip()]
cells = {}
for r in rows:
    name = r["model"].rsplit("-", 1)[-1].replace(".gguf", "")
    key = (name, r["isa"])
    c = cells.setdefault(key, {})
    if r["pp"] == 512:
        c["pp512"] = r["prefill_tok_s"]
    else:
        c[f"dec{r['threads']}"] = r["decode_tok_s"]
        c[f"pp{r['threads']}"] = r["prefill_tok_s"]
    for p in r.get("matmul_paths", []):
        c.setdefault("paths", {}).setdefault(p["phase"], set()).add(f"{p['weights']}: {p['path']}")
print("| bench-134m | kernels | decode 1 / 2 thr | pp64 1 / 2 thr | pp512 1 thr | prefill path | decode path |")
print("|---|---|---|---|---|---|---|")
for (name, isa), c in cells.items():
    paths = c.get("paths", {})
    print(f"| {name} | {isa} | {c.get('dec1', 0):.0f} / {c.get('dec2', 0):.0f} "
          f"| {c.get('pp1', 0):.0f} / {c.get('pp2', 0):.0f} | {c.get('pp512', 0):.0f} "
          f"| {'; '.join(sorted(paths.get('prefill', [])))} "
          f"| {'; '.join(sorted(paths.get('decode', [])))} |")
