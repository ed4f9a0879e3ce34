#!/usr/bin/env bash
# run_all.sh: every benchmark on bench/README.md, in one command, writing bench/results/:
# the kernel micro-benchmarks, decode / prefill per dtype and thread count, the actor
# pipeline, serving (sweep, batched decode, prefix reuse, recovery), the HTTP load driver,
# and the plots. Builds what it needs first. About 25 minutes on 2 cores.
#   bash bench/run_all.sh [BUILD_DIR] [MODELS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C "$BUILD" troupe kernels_bench amx_tiles_bench pipeline_bench serving_bench
mkdir -p bench/results "$MODELS"
PY="$BUILD/pyenv/bin/python"
[ -x "$PY" ] || python3 -m venv "$BUILD/pyenv"
"$PY" -m pip install -q matplotlib openai

"$BUILD/bench/kernels_bench" --benchmark_filter='262144|/768/' --benchmark_out=bench/results/kernels.json \
  --benchmark_out_format=json
"$BUILD/bench/amx_tiles_bench" | tee bench/results/amx_tiles.txt
bash bench/run_decode.sh "$BUILD" "$MODELS"
"$BUILD/bench/pipeline_bench" --rounds 15 --models "$MODELS" --json bench/results/pipeline.json
"$BUILD/bench/serving_bench" sweep --seconds 10 --models "$MODELS" --json bench/results/serving_sweep.json
"$BUILD/bench/serving_bench" sweep --seconds 10 --kv-dtype f16 --models "$MODELS" \
  --json bench/results/serving_sweep_kv_f16.json
"$BUILD/bench/serving_bench" batch --models "$MODELS" --json bench/results/serving_batch.json
"$BUILD/bench/serving_bench" batch --kv-dtype f16 --models "$MODELS" \
  --json bench/results/serving_batch_kv_f16.json
"$BUILD/bench/serving_bench" prefix --models "$MODELS" --json bench/results/serving_prefix.json
"$BUILD/bench/serving_bench" recovery --seconds 15 --models "$MODELS" --json bench/results/serving_recovery.json
"$PY" bench/http_load.py --troupe "$BUILD/cli/troupe" --clients 200 --seconds 30 --json bench/results/http_load.json
"$PY" bench/plot.py
