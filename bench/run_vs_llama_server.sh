#!/usr/bin/env bash
# run_vs_llama_server.sh: `troupe serve` against llama.cpp's llama-server on the same GGUF file
# (bench-134m q8_0 by default), one compute thread each, N concurrent streaming clients that
# send 64-token prompts (random token ids) and read 64 tokens each (ignore_eos), back to back
# for SECONDS, each request on a new connection (llama-server closes one after its stream); the two servers alternate at every N and every round. Both keep their KV cache
# in f16 (llama-server's default). One JSON object per run into
# bench/results/vs_llama_server.jsonl, or OUT (bench/http_load.py's fields, plus engine and clients),
# then the table of bench/README.md (show_vs_llama_server.py).
#   [OUT=F] [CLIENTS="1 4 16 64"] bash bench/run_vs_llama_server.sh [BUILD] [LLAMA_SERVER] [MODEL] [ROUNDS=2] [SECONDS=30]
# TROUPE_ISA=avx2 in the environment runs Troupe on its AVX2 kernels (the llama-server of
# `bench/build_llama_cpp.sh DIR avx2` is the matching llama.cpp).
# LLAMA_SERVER: bench/build_llama_cpp.sh builds one (default /tmp/llama-cpp/build-native/bin/).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
LLAMA=${2:-/tmp/llama-cpp/build-native/bin/llama-server}
MODEL=${3:-/tmp/troupe-bench/bench-134m-q8_0.gguf}
ROUNDS=${4:-2}
SECONDS_=${5:-30}
CLIENTS=${CLIENTS:-"1 4 16 64"}
PY=${PY:-python3}
out=${OUT:-bench/results/vs_llama_server.jsonl}
mkdir -p bench/results "$(dirname "$MODEL")"
[ -f "$MODEL" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype q8_0 --out "$MODEL" > /dev/null
: > "$out"
port=18471
wait_up() { # the server answers /v1/models
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/v1/models" > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on $port did not come up" >&2
  return 1
}
load() { # engine clients
  "$PY" bench/http_load.py --url "http://127.0.0.1:$port" --clients "$2" --seconds "$SECONDS_" \
    --max-tokens 64 --prompt-tokens 64 --ignore-eos --reconnect --model m --json /tmp/vs_llama_server.json \
    > /dev/null || true
  "$PY" -c "import json; j=json.load(open('/tmp/vs_llama_server.json')); j['engine']='$1'; j['clients']=$2; print(json.dumps(j))" >> "$out"
}
for r in $(seq 1 "$ROUNDS"); do
  for n in $CLIENTS; do
    ctx=$(( n * 128 > 4096 ? n * 128 : 4096 ))
    "$BUILD/cli/troupe" serve -m "$MODEL" --port $port --threads 1 --kv-dtype f16 \
      --max-waiting 100000 --served-model-name m 2> /tmp/troupe_serve.log &
    pid=$!
    wait_up && load troupe "$n"
    kill $pid; wait $pid 2> /dev/null || true
    "$LLAMA" -m "$MODEL" --port $port -t 1 -tb 1 -np "$n" -c "$ctx" -cb --no-webui \
      2> /tmp/llama_server.log > /dev/null &
    pid=$!
    wait_up && load llama-server "$n"
    kill $pid; wait $pid 2> /dev/null || true
  done
done
"$PY" bench/show_vs_llama_server.py < "$out"
