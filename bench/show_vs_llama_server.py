"""show_vs_llama_server.py: the serving table of bench/README.md from
bench/results/vs_llama_server.jsonl (run_vs_llama_server.sh): per client count, each engine's
aggregate tok/s, TTFT p50 and inter-token p50 / p99 (medians over rounds; every round in
brackets for tok/s), and the throughput ratio Troupe / llama-server.

  python3 bench/show_vs_llama_server.py < bench/results/vs_llama_server.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict


def main():
    runs = defaultdict(list)
    for line in sys.stdin:
        if line.strip():
            j = json.loads(line)
            runs[(j["clients"], j["engine"])].append(j)
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    print("| clients | engine | tok/s (rounds) | TTFT p50 ms | ITL p50 / p99 / max ms | errors | ratio tok/s |")
    print("|---|---|---|---|---|---|---|")
    for n in sorted({c for c, _ in runs}):
        t = runs.get((n, "troupe"), [])
        l = runs.get((n, "llama-server"), [])
        for name, rs in (("Troupe", t), ("llama-server", l)):
            if not rs:
                continue
            each = " / ".join(f"{r['tokens_per_s']:.0f}" for r in rs)
            ratio = ""
            if name == "Troupe" and l:
                ratio = f"**{med(t, 'tokens_per_s') / med(l, 'tokens_per_s'):.2f}**"
            errs = sum(r["errors"] + r["incomplete_streams"] for r in rs)
            print(f"| {n} | {name} | {med(rs, 'tokens_per_s'):.1f} ({each}) | {med(rs, 'ttft_p50_ms'):.0f} | "
                  f"{med(rs, 'itl_p50_ms'):.1f} / {med(rs, 'itl_p99_ms'):.1f} / {med(rs, 'itl_max_ms'):.0f} | "
                  f"{errs} | {ratio} |")


if __name__ == "__main__":
    main()
