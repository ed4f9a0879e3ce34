#!/usr/bin/env bash
# run_comm.sh: Troupe's UCX groups (bench/comm_bench) beside ucx_perftest on the same machine,
# alternating, ROUNDS rounds: 1 MiB tag bandwidth and 8-byte tag latency (ucx_perftest as
# shipped, and with -e: endpoints with peer error handling, as Troupe's groups have), then
# comm_bench's point-to-point and all-reduce figures. One JSON object per line into
# bench/results/comm.jsonl, then the medians (bench/show_comm.py).
#   bash bench/run_comm.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${2:-5}
mkdir -p bench/results
out=bench/results/comm.jsonl
: > "$out"
port=13400
perftest() { # test size iterations extra-flags -> prints the "Final:" line's fields
  port=$((port + 1))
  ucx_perftest -p "$port" -t "$1" -s "$2" -n "$3" $4 > /dev/null 2>&1 &
  local server=$!
  sleep 0.3
  ucx_perftest 127.0.0.1 -p "$port" -t "$1" -s "$2" -n "$3" $4 2>/dev/null | awk '/Final:/ {print $4, $7}'
  wait "$server" || true
}
for r in $(seq "$ROUNDS"); do
  for flags in "" "-e"; do
    read -r _ bw < <(perftest tag_bw 1048576 2000 "$flags")
    read -r lat _ < <(perftest tag_lat 8 100000 "$flags")
    echo "{\"engine\":\"ucx_perftest${flags:+ $flags}\",\"round\":$r,\"what\":\"p2p_bandwidth\",\"GBps\":$(python3 -c "print(round($bw*2**20/1e9,3))")}" >> "$out"
    echo "{\"engine\":\"ucx_perftest${flags:+ $flags}\",\"round\":$r,\"what\":\"p2p_latency\",\"half_rtt_us\":$lat}" >> "$out"
  done
  "$BUILD/bench/comm_bench" --iters 5000 2>/dev/null | sed "s/^{/{\"engine\":\"troupe\",\"round\":$r,/" >> "$out"
done
python3 bench/show_comm.py "$out"
