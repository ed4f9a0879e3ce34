#!/usr/bin/env bash
# test.sh: the one test command (README, .ci/run): installs system packages, configures
# (Ninja, ccache), builds everything and runs the CPU test suite (ctest -LE gpu), then prints
# ctest's summary. BUILD_DIR (default build) and JOBS (default: all cores) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
cd "$BUILD_DIR"
ctest -LE gpu --output-on-failure -j "$JOBS" --timeout 900
