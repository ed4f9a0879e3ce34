#!/usr/bin/env bash
# run_fusion_ab.sh: A/B of the fusion passes on bench-134m q8_0 decode, 1 thread: the same
# binary with and without them (--no-fuse), alternating, ROUNDS rounds at two prompt lengths
# and with an f32 and an f16 KV cache; each run profiles the decode step per kernel (--profile). One JSON object per line into
# bench/results/fusion_pass_ab.jsonl, summarised by bench/show_fusion_ab.py.
#   bash bench/run_fusion_ab.sh [BUILD_DIR] [MODELS_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
ROUNDS=${3:-3}
mkdir -p "$MODELS" bench/results
m="$MODELS/bench-134m-q8_0.gguf"
[ -f "$m" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype q8_0 --out "$m"
out=bench/results/fusion_pass_ab.jsonl
: > "$out"
for r in $(seq "$ROUNDS"); do
  for kv in f32 f16; do
    for p in 16 256; do
      for f in fused unfused; do
        flag=$([ "$f" = unfused ] && echo --no-fuse || true)
        "$BUILD/cli/troupe" bench -m "$m" --threads 1 --repeats 5 --prompt-tokens "$p" \
          --gen-tokens 64 --kv-dtype "$kv" --profile --json $flag |
          python3 -c "import json,sys; j=json.load(sys.stdin); j['variant']='$f'; j['round']=$r; j['kv']='$kv'; print(json.dumps(j))" >> "$out"
      done
    done
  done
done
python3 bench/show_fusion_ab.py "$out"
