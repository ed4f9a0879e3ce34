#!/usr/bin/env bash
# run_vs_llama_cpp.sh: Troupe (`troupe bench`) and llama.cpp (bench/llama_cpp_decode.py through
# llama-cpp-python) on the same bench-134m GGUF files, alternating run by run: f32, f16, bf16,
# q8_0, q4_0 (troupe synth) and Q4_K_M / Q5_K_M as llama.cpp's own quantizer writes them from
# the f32 file; decode and pp64 with 1 and 2 threads, pp512 with 1. One JSON object per line
# into bench/results/vs_llama_cpp.jsonl, then the ratio table of bench/README.md.
#   bash bench/run_vs_llama_cpp.sh [BUILD_DIR] [MODELS_DIR] [LLAMA_PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
PY=${3:-/tmp/llvenv/bin/python}
mkdir -p "$MODELS" bench/results
out=bench/results/vs_llama_cpp.jsonl
: > "$out"
for d in f32 f16 bf16 q8_0 q4_0; do
  m="$MODELS/bench-134m-$d.gguf"
  [ -f "$m" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype "$d" --out "$m" > /dev/null
done
for ft in Q4_K_M Q5_K_M; do # llama.cpp's quantizer, from the f32 file
  m="$MODELS/bench-134m-llama-$(echo "$ft" | tr 'A-Z' 'a-z').gguf"
  [ -f "$m" ] || "$PY" -c "
import ctypes, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_$ft
assert llama_cpp.llama_model_quantize(b'$MODELS/bench-134m-f32.gguf', b'$m', ctypes.byref(p)) == 0"
done
tag() { python3 -c "import json,sys; j=json.loads(sys.stdin.read()); j['engine']='$1'; j['pp']=$2; print(json.dumps(j))"; }
for d in f32 f16 bf16 q8_0 q4_0 llama-q4_k_m llama-q5_k_m; do
  m="$MODELS/bench-134m-$d.gguf"
  for t in 1 2; do
    "$BUILD/cli/troupe" bench -m "$m" --threads "$t" --repeats 3 --prompt-tokens 64 --gen-tokens 64 --json 2>/dev/null | tag troupe 64 >> "$out"
    "$PY" bench/llama_cpp_decode.py "$m" --threads "$t" --repeats 3 | tag llama.cpp 64 >> "$out"
  done
  "$BUILD/cli/troupe" bench -m "$m" --threads 1 --repeats 2 --prompt-tokens 512 --gen-tokens 4 --json 2>/dev/null | tag troupe 512 >> "$out"
  "$PY" bench/llama_cpp_decode.py "$m" --threads 1 --repeats 2 --prompt-tokens 512 --gen-tokens 4 | tag llama.cpp 512 >> "$out"
done
python3 bench/show_vs_llama_cpp.py < "$out"
