"""table.py: the GPU check's table (bench/gpu/check.sh) from gpu_bench's JSON lines and
nvidia-smi's line (name, max SM clock, max memory clock, memory, driver): kernel GB/s and
TFLOP/s against the part's HBM bandwidth and bf16 dense peak, the 1.1 B model's decode at
batch 1 against the bandwidth bound of its weights, its prefill against the peak, and TTFT.
The part's figures come from its name and SM clock: an H200 or H100 SXM board runs its
tensor cores up to 1980 MHz (989 TFLOP/s dense bf16), the NVL boards lower (835).
With OUT/profile.jsonl as a third argument (gpu_bench --profile 1), the prefill and decode
steps' time split into weight matmuls, attention, and the rest, per kernel.
  python3 bench/gpu/table.py OUT/bench.jsonl OUT/gpu.txt [OUT/profile.jsonl]
"""
import json
import os
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
smi = open(sys.argv[2]).read().strip().split(",") if len(sys.argv) > 2 else ["?"]
name = smi[0].strip()
sm_clock = float(smi[1].split()[0]) if len(smi) > 1 and smi[1].split()[0].isdigit() else 0.0


def part(n, clock):
    """(bf16 dense TFLOP/s, HBM TB/s, what) for the device named n."""
    nvl = "NVL" in n or (0 < clock < 1900)
    if "H200" in n:
        return (835.0, 4.8, "H200 NVL") if nvl else (989.0, 4.8, "H200 SXM")
    if "H100" in n:
        if "PCIe" in n:
            return 756.0, 2.0, "H100 PCIe"
        return (835.0, 3.9, "H100 NVL") if nvl else (989.0, 3.35, "H100 SXM")
    if "A100" in n:
        return 312.0, 2.0, "A100"
    return 0.0, 0.0, "unknown part"


peak, hbm, what = part(name, sm_clock)
print(f"device: {name} ({what}: {peak:.0f} TFLOP/s dense bf16, {hbm:.2f} TB/s HBM; "
      f"max SM clock {sm_clock:.0f} MHz)")
print()
print("| what | measured | bound | of the bound |")
print("|---|---|---|---|")


def pct(x, b):
    return f"{100.0 * x / b:.0f}%" if b > 0 else "-"


for r in rows:
    if r.get("kernel") == "matmul":
        label = f"matmul {r['weights']} T={r['T']} ({r['N']}x{r['K']})"
        if r["T"] >= 64:
            label += ", exact activations" if r["exact_activations"] else ", bf16 activations"
            print(f"| {label} | {r['tflop_s']:.0f} TFLOP/s ({r['us']:.0f} us) | {peak:.0f} TFLOP/s "
                  f"| {pct(r['tflop_s'], peak)} |")
        else:
            print(f"| {label} | {r['gb_s']:.0f} GB/s ({r['us']:.1f} us) | {hbm * 1000:.0f} GB/s "
                  f"| {pct(r['gb_s'], hbm * 1000)} |")
    elif r.get("kernel") == "paged_attention":
        print(f"| decode attention {r['cache']} cache, {r['S']} positions, {r['H']}/{r['Hkv']} heads "
              f"| {r['gb_s']:.0f} GB/s ({r['us']:.1f} us) | {hbm * 1000:.0f} GB/s "
              f"| {pct(r['gb_s'], hbm * 1000)} |")
for r in rows:
    if "decode_tok_s" not in r:
        continue
    m = r["model"].split("/")[-1]
    bound = hbm * 1e12 / r["weight_bytes_per_token"] if hbm else 0.0
    if r["prompt_tokens"] <= 64:
        print(f"| {m} decode, batch 1 | {r['decode_tok_s']:.0f} tok/s = {r['decode_gb_s']:.0f} GB/s "
              f"(step p50 {r['decode_step_us_p50']:.0f} us) | {bound:.0f} tok/s "
              f"| **{pct(r['decode_tok_s'], bound)}** (target 70%) |")
    else:
        print(f"| {m} prefill, {r['prompt_tokens']} tokens | {r['prefill_tok_s']:.0f} tok/s = "
              f"{r['prefill_tflop_s']:.0f} TFLOP/s, TTFT {r['ttft_ms']:.1f} ms | {peak:.0f} TFLOP/s "
              f"| **{pct(r['prefill_tflop_s'], peak)}** (target 50%) |")
copy = [r["copy_gb_s"] for r in rows if "copy_gb_s" in r]
if copy:
    print(f"| device-to-device copy (reads + writes) | {max(copy):.0f} GB/s | {hbm * 1000:.0f} GB/s "
          f"| {pct(max(copy), hbm * 1000)} |")

if len(sys.argv) > 3 and os.path.exists(sys.argv[3]):
    prof = [json.loads(l) for l in open(sys.argv[3]) if l.strip().startswith("{")]
    kernels = [r for r in prof if "profile" in r]
    if kernels:
        print()
        print("Per kernel (gpu_bench --profile 1: every node synchronised, no graph; us per step):")
        print()
        print("| step | weight matmuls | attention | the rest | kernels |")
        print("|---|---|---|---|---|")
        for decode in (False, True):
            ks = [r for r in kernels if r["decode"] == decode]
            mm = sum(r["us_per_step"] for r in ks if r["weight_matmul"])
            at = sum(r["us_per_step"] for r in ks if "attention" in r["profile"])
            rest = sum(r["us_per_step"] for r in ks) - mm - at
            top = sorted(ks, key=lambda r: -r["us_per_step"])[:5]
            names = ", ".join(f"{r['profile'].split('/')[1]} {r['us_per_step']:.0f}" for r in top)
            print(f"| {'decode' if decode else 'prefill'} | {mm:.0f} | {at:.0f} | {rest:.0f} | {names} |")
