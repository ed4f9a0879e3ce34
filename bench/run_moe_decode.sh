#!/usr/bin/env bash
# run_moe_decode.sh: decode and prefill of the ~1 B mixture of experts (troupe synth --preset
# moe-1b, q8_0: 32 experts of which 4 per token) by Troupe (`troupe bench`) and by llama.cpp
# (bench/llama_cpp_decode.py through llama-cpp-python) on the same file, 1 and 2 threads,
# alternating, ROUNDS rounds; one JSON object per line into bench/results/moe_decode.jsonl
# (DTYPE=mxfp4: the same model in MXFP4, GPT-OSS's expert format, into moe_decode_mxfp4.jsonl).
#   [DTYPE=q8_0] bash bench/run_moe_decode.sh [BUILD_DIR] [MODELS_DIR] [LLAMA_PYTHON] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
PY=${3:-python3}
ROUNDS=${4:-2}
mkdir -p "$MODELS" bench/results
DTYPE=${DTYPE:-q8_0}
m="$MODELS/moe-1b-$DTYPE.gguf"
[ -f "$m" ] || "$BUILD/cli/troupe" synth --preset moe-1b --dtype "$DTYPE" --out "$m"
out=bench/results/moe_decode.jsonl
[ "$DTYPE" = q8_0 ] || out=bench/results/moe_decode_$DTYPE.jsonl
: > "$out"
for r in $(seq "$ROUNDS"); do
  for t in 1 2; do
    "$BUILD/cli/troupe" bench -m "$m" --threads "$t" --repeats 3 --prompt-tokens 64 \
      --gen-tokens 64 --json | python3 -c "import json,sys; j=json.load(sys.stdin); j['engine']='troupe'; j['round']=$r; print(json.dumps(j))" >> "$out"
    "$PY" bench/llama_cpp_decode.py "$m" --threads "$t" --repeats 3 | python3 -c "import json,sys; j=json.loads(sys.stdin.read()); j['round']=$r; print(json.dumps(j))" >> "$out"
  done
done
cat "$out"
