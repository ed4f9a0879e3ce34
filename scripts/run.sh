#!/usr/bin/env bash
# run.sh: the main job from a fresh machine: installs system packages, builds the `troupe`
# command, and runs it with the arguments given (default: generate with the bundled model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target troupe
if [ $# -eq 0 ]; then set -- generate --prompt "Once upon a time"; fi
exec "$BUILD_DIR/cli/troupe" "$@"
