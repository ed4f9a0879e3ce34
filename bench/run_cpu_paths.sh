#!/usr/bin/env bash
# run_cpu_paths.sh: `troupe bench` on the bench-134m shape in every weight dtype the CPU
# kernels take (f32 f16 bf16 q8_0 q4_0 Q4_K Q5_K Q6_K and the Q4_K_M mix), decode and pp64
# with 1 and 2 threads and pp512 with 1, under the native kernels and TROUPE_ISA=avx2; one
# JSON object per line (with "isa" and "pp") into bench/results/cpu_paths.jsonl, then the
# table of bench/README.md ("CPU paths") from bench/show_cpu_paths.py.
#   bash bench/run_cpu_paths.sh [BUILD_DIR] [MODELS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-/tmp/troupe-bench}
mkdir -p "$MODELS" bench/results
out=bench/results/cpu_paths.jsonl
: > "$out"
run() { # isa pp json-args...
  local isa=$1 pp=$2
  shift 2
  TROUPE_ISA=$isa "$BUILD/cli/troupe" bench "$@" --json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); j['isa']='$isa'; j['pp']=$pp; print(json.dumps(j))" >> "$out"
}
for d in f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k q4_k_m; do
  m="$MODELS/bench-134m-$d.gguf"
  [ -f "$m" ] || "$BUILD/cli/troupe" synth --preset bench-134m --dtype "$d" --out "$m" > /dev/null
  for isa in native avx2; do
    for t in 1 2; do
      run "$isa" 64 -m "$m" --threads "$t" --repeats 3 --prompt-tokens 64 --gen-tokens 64
    done
    run "$isa" 512 -m "$m" --threads 1 --repeats 2 --prompt-tokens 512 --gen-tokens 4
  done
done
python3 bench/show_cpu_paths.py < "$out"
