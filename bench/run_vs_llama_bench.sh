#!/usr/bin/env bash
# run_vs_llama_bench.sh: Troupe (`troupe bench`) against llama.cpp's own llama-bench on the same
# bench-134m GGUF files (f32, f16, bf16, q8_0, q4_0 from troupe synth; Q4_K_M, Q5_K_M, IQ4_XS
# and IQ4_NL as llama-quantize writes them from the f32 file; DTYPES=llama-iq4_xs ... runs those), alternating run by run: decode and pp64 at 1
# and 2 threads, pp512 at 1. ISA=avx2 runs both engines on their AVX2 kernels on any x86 CPU
# (TROUPE_ISA=avx2; llama.cpp built with AVX2 / FMA / F16C only by build_llama_cpp.sh): what
# an AVX2-only machine runs, on these cores. JSON lines into bench/results/vs_llama_bench_ISA.jsonl (or OUT)
# (the fields of run_vs_llama_cpp.sh's), then show_vs_llama_cpp.py's ratio table.
#   ISA=avx2|native [DTYPES=...] [OUT=F] bash bench/run_vs_llama_bench.sh [BUILD] [MODELS_DIR] [LLAMA_BIN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ISA=${ISA:-avx2}
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
LLAMA=${3:-/tmp/llama-cpp/build-$ISA/bin}
DTYPES=${DTYPES:-"f32 f16 bf16 q8_0 q4_0 llama-q4_k_m llama-q5_k_m"}
mkdir -p "$MODELS" bench/results
out=${OUT:-bench/results/vs_llama_bench_$ISA.jsonl}
: > "$out"
for d in f32 f16 bf16 q8_0 q4_0; do
  m="$MODELS/bench-134m-$d.gguf"
  [ -f "$m" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype "$d" --out "$m" > /dev/null
done
for ft in Q4_K_M Q5_K_M IQ4_XS IQ4_NL; do
  m="$MODELS/bench-134m-llama-$(echo "$ft" | tr 'A-Z' 'a-z').gguf"
  [ -f "$m" ] || "$LLAMA/llama-quantize" "$MODELS/bench-134m-f32.gguf" "$m" "$ft" > /dev/null 2>&1
done
troupe_env=()
[ "$ISA" = avx2 ] && troupe_env=(TROUPE_ISA=avx2)
troupe() { # model threads prompt gen repeats
  env "${troupe_env[@]}" "$BUILD/cli/troupe" bench -m "$1" --threads "$2" --prompt-tokens "$3" \
    --gen-tokens "$4" --repeats "$5" --json 2> /dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); j['engine']='troupe'; j['pp']=$3; print(json.dumps(j))"
}
llama() { # model threads prompt gen repeats: llama-bench's pp and tg runs as one line
  "$LLAMA/llama-bench" -m "$1" -t "$2" -p "$3" -n "$4" -r "$5" -o json 2> /dev/null | python3 -c "
import json, sys
runs = json.load(sys.stdin)
pp = [r['avg_ts'] for r in runs if r['n_prompt'] > 0 and r['n_gen'] == 0]
tg = [r['avg_ts'] for r in runs if r['n_gen'] > 0 and r['n_prompt'] == 0]
print(json.dumps({'engine': 'llama.cpp', 'model': '$1', 'threads': $2, 'pp': $3,
                  'prefill_tok_s': pp[0] if pp else 0.0, 'decode_tok_s': tg[0] if tg else 0.0}))"
}
for d in $DTYPES; do
  m="$MODELS/bench-134m-$d.gguf"
  for t in 1 2; do
    troupe "$m" "$t" 64 64 3 >> "$out"
    llama "$m" "$t" 64 64 3 >> "$out"
  done
  troupe "$m" 1 512 4 2 >> "$out"
  llama "$m" 1 512 0 2 >> "$out"
done
python3 bench/show_vs_llama_cpp.py < "$out"
