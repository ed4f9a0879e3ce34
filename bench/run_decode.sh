#!/usr/bin/env bash
# run_decode.sh: `troupe bench` on the bench-134m shape at f32, f16, bf16, q8_0, q4_0 with 1
# and 2 threads, and on stories260K; one JSON object per line into bench/results/decode.jsonl.
#   bash bench/run_decode.sh [BUILD_DIR] [MODELS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
mkdir -p "$MODELS" bench/results
out=bench/results/decode.jsonl
: > "$out"
for d in f32 f16 bf16 q8_0 q4_0; do
  m="$MODELS/bench-134m-$d.gguf"
  [ -f "$m" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype "$d" --out "$m"
  for t in 1 2; do
    "$BUILD/cli/troupe" bench -m "$m" --threads "$t" --repeats 5 --prompt-tokens 64 --gen-tokens 64 --json >> "$out"
    tail -n1 "$out" | python3 bench/show_decode.py
  done
done
"$BUILD/cli/troupe" bench --threads 1 --repeats 9 --prompt-tokens 32 --gen-tokens 64 --json >> "$out"
tail -n1 "$out" | python3 bench/show_decode.py
