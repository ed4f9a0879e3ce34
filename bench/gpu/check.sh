#!/usr/bin/env bash
# check.sh: everything that needs a GPU, in one run (about 2 minutes on one H200, 16 cores):
#  1. build the GPU subset (TROUPE_GPU_ONLY, sm_90) against .gpu-deps.tar.xz, or, where
#     Troupe's packages are installed, the whole tree;
#  2. the op harness on the GPU: every op's kernel against the reference, with the tensor
#     cores' rounded activations, with exact ones, and as compositions of primitives;
#  3. the device tests: copies, every family's fixture and every weight type on the GPU
#     against the CPU, a GPU + CPU pipeline token-exact against the CPU alone;
#  4. kernels alone (GEMV GB/s, GEMM TFLOP/s, decode attention) and decode / prefill of a
#     synthetic 1.1 B bf16 Llama (llama-1b: TinyLlama's shape, context 2048) at batch 1;
#  5. one table (table.py) against the part's HBM bandwidth and bf16 dense peak, and the
#     decode and prefill steps' time per kernel (gpu_bench --profile 1: profile.jsonl).
# Every step has a time limit (LIMIT seconds, 180 unless set) so a hang costs only its step.
# Everything goes to $OUT (the device tool's folder; else bench/gpu/out): logs, bench.jsonl,
# table.md. A failing step is reported and the rest still runs; the exit status counts them.
# On this machine first: bash bench/gpu/pack_deps.sh and bash bench/gpu/slim_tree.sh on (the
# call's tree must stay under 64 MiB); then the device call carries .gpu-deps.tar.xz and runs
# bash bench/gpu/check.sh; then bash bench/gpu/slim_tree.sh off.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/gpu/out}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build-gpu}
failed=0
step() { echo "== $(date +%T) $*" | tee -a "$OUT/steps.txt"; }
check() { # name, command...: runs it (at most LIMIT seconds, 180 unless set), logs to
  local name=$1 #                 $OUT/name.txt, counts a failure
  shift
  if timeout -k 5 "${LIMIT:-180}" "$@" >"$OUT/$name.txt" 2>&1; then
    echo "   ok   $name" | tee -a "$OUT/steps.txt"
  else
    local rc=$?
    echo "   FAIL $name (exit $rc; tail below)" | tee -a "$OUT/steps.txt"
    tail -25 "$OUT/$name.txt" | tee -a "$OUT/steps.txt"
    failed=$((failed + 1))
  fi
}

step "device"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,driver_version \
  --format=csv,noheader | tee "$OUT/gpu.txt"

step "build ($BUILD, $JOBS jobs)"
if [ "${GPU_ONLY:-0}" != 1 ] && pkg-config --exists ucx 2>/dev/null && [ -f /usr/include/caf/all.hpp ]; then
  flags=() # Troupe's packages are here: the whole tree
else
  deps=/tmp/troupe-gpu-deps
  mkdir -p "$deps" && tar -xJf .gpu-deps.tar.xz -C "$deps" || {
    echo "no .gpu-deps.tar.xz: run bench/gpu/pack_deps.sh here and carry it" | tee -a "$OUT/steps.txt"
    exit 1
  }
  flags=(-DTROUPE_GPU_ONLY=ON "-DTROUPE_DEPS=$deps")
fi
LIMIT=60 check configure cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTROUPE_BENCH=ON "${flags[@]}"
# -k 0: every file that fails is named at once (a compiler newer than the one here may refuse
# what this one takes)
LIMIT=420 check build cmake --build "$BUILD" -j "$JOBS" --target test-ops device_test gpu_bench \
  nccl_group_gpu_test -- -k 0
[ -x "$BUILD/bench/gpu/gpu_bench" ] || { echo "build failed: nothing to run"; exit 1; }

# the most telling first: a short run still says whether the kernels are right and how fast
step "op harness on the GPU, device tests"
LIMIT=45 check ops_cuda "$BUILD/tests/kernels/test-ops" test --backend cuda
LIMIT=45 check device_test env TROUPE_EXACT_ACTIVATIONS=1 "$BUILD/tests/exec/device_test"

step "benchmarks"
: >"$OUT/bench.jsonl"
LIMIT=30 check bench_kernels bash -c "set -o pipefail; '$BUILD/bench/gpu/gpu_bench' kernels | tee -a '$OUT/bench.jsonl'"
LIMIT=30 check bench_decode bash -c "set -o pipefail; '$BUILD/bench/gpu/gpu_bench' synth:llama-1b:bf16 \
  --prompt-tokens 16 --gen-tokens 256 --repeats 3 | tee -a '$OUT/bench.jsonl'"
LIMIT=30 check bench_prefill bash -c "set -o pipefail; '$BUILD/bench/gpu/gpu_bench' synth:llama-1b:bf16 \
  --prompt-tokens 2000 --gen-tokens 8 --repeats 3 | tee -a '$OUT/bench.jsonl'"
LIMIT=40 check profile bash -c "set -o pipefail; '$BUILD/bench/gpu/gpu_bench' synth:llama-1b:bf16 \
  --prompt-tokens 2000 --gen-tokens 32 --repeats 1 --profile 1 | tee '$OUT/profile.jsonl'"
check table python3 bench/gpu/table.py "$OUT/bench.jsonl" "$OUT/gpu.txt" "$OUT/profile.jsonl"
cp "$OUT/table.txt" "$OUT/table.md" 2>/dev/null
cat "$OUT/table.md" 2>/dev/null

step "collectives, the other precisions, graphs off"
nccl_test=$BUILD/bench/gpu/nccl_group_gpu_test # the GPU-only build's; the full tree's below
[ -x "$nccl_test" ] || nccl_test=$BUILD/tests/transport/nccl_group_gpu_test
LIMIT=20 check nccl_group "$nccl_test" # one rank on one GPU; two ranks where there are two
LIMIT=30 check ops_cuda_exact env TROUPE_EXACT_ACTIVATIONS=1 "$BUILD/tests/kernels/test-ops" test --backend cuda
LIMIT=30 check ops_cuda_composed "$BUILD/tests/kernels/test-ops" test --backend cuda --composed
LIMIT=30 check device_test_graphs_off env TROUPE_EXACT_ACTIVATIONS=1 TROUPE_CUDA_GRAPHS=0 \
  "$BUILD/tests/exec/device_test" --gtest_filter='Device.Stories*:Device.GpuThenCpu*'
step "done: $failed failed step(s)"
exit "$failed"
