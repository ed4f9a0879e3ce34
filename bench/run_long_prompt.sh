#!/usr/bin/env bash
# run_long_prompt.sh: prefill of one long prompt (2000 tokens by default), Troupe (`troupe
# bench`) against llama.cpp's llama-bench on the same bench-134m GGUF files, one thread,
# alternating run by run, ROUNDS rounds: where the prefill attention, which grows with the
# square of the prompt, weighs most. JSON lines into bench/results/long_prompt_ISA.jsonl, then
# a table of tok/s and ratios (medians over the rounds).
#   ISA=native|avx2 DTYPES="q8_0 f16" bash bench/run_long_prompt.sh [BUILD] [MODELS_DIR] [LLAMA_BIN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ISA=${ISA:-native}
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
LLAMA=${3:-/tmp/llama-cpp/build-$ISA/bin}
DTYPES=${DTYPES:-"f32 f16 q8_0 q4_0"}
PROMPT=${PROMPT:-2000}
ROUNDS=${ROUNDS:-2}
mkdir -p "$MODELS" bench/results
out=bench/results/long_prompt_$ISA.jsonl
: > "$out"
troupe_env=()
[ "$ISA" = avx2 ] && troupe_env=(TROUPE_ISA=avx2)
for r in $(seq "$ROUNDS"); do
  for d in $DTYPES; do
    m="$MODELS/bench-134m-$d.gguf"
    [ -f "$m" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype "$d" --out "$m" > /dev/null
    env "${troupe_env[@]}" "$BUILD/cli/troupe" bench -m "$m" --threads 1 --prompt-tokens "$PROMPT" \
      --gen-tokens 1 --repeats 1 --json 2> /dev/null |
      python3 -c "import json,sys; j=json.load(sys.stdin); print(json.dumps({'engine': 'troupe', 'dtype': '$d', 'round': $r, 'pp': $PROMPT, 'prefill_tok_s': j['prefill_tok_s']}))" >> "$out"
    "$LLAMA/llama-bench" -m "$m" -t 1 -p "$PROMPT" -n 0 -r 1 -o json 2> /dev/null |
      python3 -c "import json,sys; r=json.load(sys.stdin)[0]; print(json.dumps({'engine': 'llama.cpp', 'dtype': '$d', 'round': $r, 'pp': $PROMPT, 'prefill_tok_s': r['avg_ts']}))" >> "$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| bench-134m | pp tokens | Troupe tok/s | llama.cpp tok/s | ratio |")
print("|---|---|---|---|---|")
for d in dict.fromkeys(r['dtype'] for r in rows):
    t = statistics.median(r['prefill_tok_s'] for r in rows if r['dtype'] == d and r['engine'] == 'troupe')
    l = statistics.median(r['prefill_tok_s'] for r in rows if r['dtype'] == d and r['engine'] == 'llama.cpp')
    print(f"| {d} | {rows[0]['pp']} | {t:.0f} | {l:.0f} | **{t / l:.2f}** |")
PY
