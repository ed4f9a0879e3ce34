#!/usr/bin/env bash
# run_1b_decode.sh: the 1 B model's decode (`troupe synth --preset llama-1b`: TinyLlama's shape)
# against llama.cpp's own llama-bench on the same GGUF files, f16 and q8_0, 1 and 2 threads,
# the two engines alternating run by run for ROUNDS rounds: `troupe bench --prompt-tokens 16
# --gen-tokens 32 --repeats 3` against `llama-bench -p 0 -n 32 -r 3`. ISA as in
# run_vs_llama_bench.sh (avx2: TROUPE_ISA=avx2 against llama.cpp's AVX2 build). One JSON
# object per run into OUT, then per cell the ratio of the engines' medians and each round's.
#   ISA=avx2|native [OUT=F] bash bench/run_1b_decode.sh [BUILD] [MODELS_DIR] [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
ISA=${ISA:-native}
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
ROUNDS=${3:-2}
LLAMA=${LLAMA:-/tmp/llama-cpp/build-$ISA/bin}
out=${OUT:-bench/results/decode_1b_$ISA.jsonl}
mkdir -p "$MODELS" bench/results
: > "$out"
for d in f16 q8_0; do
  m="$MODELS/llama-1b-$d.gguf"
  [ -f "$m" ] || "$BUILD/cli/troupe" synth --preset llama-1b --dtype "$d" --out "$m" > /dev/null
done
troupe_env=()
[ "$ISA" = avx2 ] && troupe_env=(TROUPE_ISA=avx2)
for r in $(seq "$ROUNDS"); do
  for d in f16 q8_0; do
    m="$MODELS/llama-1b-$d.gguf"
    for t in 1 2; do
      env "${troupe_env[@]}" "$BUILD/cli/troupe" bench -m "$m" --threads "$t" --repeats 3 \
        --prompt-tokens 16 --gen-tokens 32 --json 2> /dev/null | python3 -c "
import json, sys
j = json.load(sys.stdin)
print(json.dumps({'engine': 'troupe', 'dtype': '$d', 'threads': $t, 'round': $r,
                  'decode_tok_s': j['decode_tok_s']}))" >> "$out"
      "$LLAMA/llama-bench" -m "$m" -t "$t" -p 0 -n 32 -r 3 -o json 2> /dev/null | python3 -c "
import json, sys
runs = json.load(sys.stdin)
print(json.dumps({'engine': 'llama.cpp', 'dtype': '$d', 'threads': $t, 'round': $r,
                  'decode_tok_s': runs[0]['avg_ts']}))" >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| 1 B decode | 1 thread | 2 threads |")
print("|---|---|---|")
for d in ("f16", "q8_0"):
    cells = []
    for t in (1, 2):
        tok = {e: [r["decode_tok_s"] for r in runs if (r["dtype"], r["threads"], r["engine"]) == (d, t, e)]
               for e in ("troupe", "llama.cpp")}
        a, b = tok["troupe"], tok["llama.cpp"]
        rounds = " / ".join(f"{x / y:.2f}" for x, y in zip(a, b))
        cells.append(f"**{statistics.median(a) / statistics.median(b):.2f}** ({rounds}; "
                     f"{statistics.median(a):.1f} / {statistics.median(b):.1f} tok/s)")
    print(f"| {d} | " + " | ".join(cells) + " |")
PY
