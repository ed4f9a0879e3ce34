"""plot.py: plots of the benchmark results (PNG), read from bench/results/.
  decode.png:  decode tokens/s against the same-run bandwidth bound, per dtype and thread count
  serving.png: aggregate decode tokens/s, TTFT and inter-token latency against concurrency
Needs matplotlib (test/bench tooling only): build/pyenv/bin/pip install matplotlib
  build/pyenv/bin/python bench/plot.py
"""
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RES = os.path.join(HERE, "results")


def decode_plot():
    rows = [json.loads(l) for l in open(os.path.join(RES, "decode.jsonl")) if "bench-134m" in l]
    labels, got, bound = [], [], []
    for r in rows:
        dt = r["model"].rsplit("-", 1)[1].replace(".gguf", "")
        labels.append(f"{dt}\n{r['threads']}t")
        got.append(r["decode_tok_s"])
        bound.append(r["decode_bound_tok_s"])
    x = range(len(labels))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.bar([i - 0.2 for i in x], bound, width=0.4, label="bound (same-run read bandwidth / bytes per token)", color="#c8d6e5")
    ax.bar([i + 0.2 for i in x], got, width=0.4, label="troupe decode", color="#2e86de")
    for i, (g, b) in enumerate(zip(got, bound)):
        ax.text(i + 0.2, g, f"{100 * g / b:.0f}%", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_ylabel("tokens / s")
    ax.set_title("bench-134m decode vs the memory-bandwidth bound")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(RES, "decode.png"), dpi=110)


def serving_plot():
    rows = json.load(open(os.path.join(RES, "serving_sweep.json")))["sweep"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for dt in sorted({r["dtype"] for r in rows}):
        rs = [r for r in rows if r["dtype"] == dt]
        c = [r["clients"] for r in rs]
        axes[0].plot(c, [r["decode_tok_s"] for r in rs], "o-", label=dt)
        axes[1].plot(c, [r["ttft_p50_ms"] for r in rs], "o-", label=f"{dt} p50")
        axes[1].plot(c, [r["ttft_p99_ms"] for r in rs], "x--", label=f"{dt} p99")
        axes[2].plot(c, [r["itl_p50_ms"] for r in rs], "o-", label=f"{dt} p50")
        axes[2].plot(c, [r["itl_p99_ms"] for r in rs], "x--", label=f"{dt} p99")
    for ax, title, unit in zip(axes, ["aggregate decode", "time to first token", "inter-token latency"],
                               ["tokens / s", "ms", "ms"]):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent sequences")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.suptitle("bench-134m serving through the engine (one shard, both cores)")
    fig.tight_layout()
    fig.savefig(os.path.join(RES, "serving.png"), dpi=110)


if __name__ == "__main__":
    decode_plot()
    serving_plot()
    print("wrote", os.path.join(RES, "decode.png"), "and", os.path.join(RES, "serving.png"))
