#!/usr/bin/env bash
# run_decode_ab.sh: decode A/B of two troupe binaries (before / after a kernel change) with
# llama.cpp's llama-bench in the same rounds: per round, model and thread count, `troupe bench
# --prompt-tokens 16 --gen-tokens G --repeats 3` of A, then of B, then `llama-bench -p 0 -n G
# -r 3` (G 32 for the 1 B files, 64 otherwise). One JSON object per run into OUT, then per cell
# the medians' ratios B / A and B / llama.cpp with each round's (bench/show_decode_ab.py).
#   A=old-troupe B=new-troupe [OUT=F] [MODELS="llama-1b-f16 bench-134m-f16"] [THREADS="1 2"]
#     [LLAMA=dir] [ISA=native|avx2] bash bench/run_decode_ab.sh [MODELS_DIR] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${A:?A=path of the troupe binary before}" "${B:?B=path of the troupe binary after}"
DIR=${1:-/tmp/troupe-bench}
ROUNDS=${2:-5}
ISA=${ISA:-native}
LLAMA=${LLAMA:-/tmp/llama-cpp/build-$ISA/bin}
MODELS=${MODELS:-llama-1b-f16 bench-134m-f16 bench-134m-bf16}
THREADS=${THREADS:-1 2}
out=${OUT:-bench/results/decode_ab.jsonl}
troupe_env=()
[ "$ISA" = avx2 ] && troupe_env=(TROUPE_ISA=avx2)
: > "$out"
for r in $(seq "$ROUNDS"); do
  for m in $MODELS; do
    f="$DIR/$m.gguf"
    g=64
    case $m in llama-1b-*) g=32 ;; esac
    for t in $THREADS; do
      for v in A B; do
        bin=${!v}
        env "${troupe_env[@]}" "$bin" bench -m "$f" --threads "$t" --repeats 3 --prompt-tokens 16 \
          --gen-tokens "$g" --json 2> /dev/null | python3 -c "
import json, sys
j = json.load(sys.stdin)
print(json.dumps({'round': $r, 'model': '$m', 'threads': $t, 'engine': '$v',
                  'decode_tok_s': j['decode_tok_s']}))" >> "$out"
      done
      "$LLAMA/llama-bench" -m "$f" -t "$t" -p 0 -n "$g" -r 3 -o json 2> /dev/null | python3 -c "
import json, sys
print(json.dumps({'round': $r, 'model': '$m', 'threads': $t, 'engine': 'llama.cpp',
                  'decode_tok_s': json.load(sys.stdin)[0]['avg_ts']}))" >> "$out"
    done
  done
done
python3 bench/show_decode_ab.py "$out"
