"""show_decode_ab.py: summarises run_decode_ab.sh's runs, one line per model and thread count:
the engines' median decode tok/s, B / A and B / llama.cpp as ratios of the medians, and each
round's ratio in brackets.
    python3 bench/show_decode_ab.py bench/results/decode_ab.jsonl
"""
import json
import statistics
import sys


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    cells = sorted({(r["model"], r["threads"]) for r in runs})
    print("| model | threads | A tok/s | B tok/s | llama.cpp | B / A (rounds) | B / llama.cpp (rounds) |")
    print("|---|---|---|---|---|---|---|")
    for model, threads in cells:
        tok = {e: [r["decode_tok_s"] for r in runs
                   if (r["model"], r["threads"], r["engine"]) == (model, threads, e)]
               for e in ("A", "B", "llama.cpp")}
        med = {e: statistics.median(v) for e, v in tok.items() if v}
        if len(med) < 3:
            continue

        def ratio(x, y):
            rounds = " / ".join(f"{a / b:.2f}" for a, b in zip(tok[x], tok[y]))
            return f"**{med[x] / med[y]:.2f}** ({rounds})"

        print(f"| {model} | {threads} | {med['A']:.1f} | {med['B']:.1f} | {med['llama.cpp']:.1f} "
              f"| {ratio('B', 'A')} | {ratio('B', 'llama.cpp')} |")


if __name__ == "__main__":
    main(sys.argv[1])
