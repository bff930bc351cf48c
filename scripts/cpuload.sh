#!/usr/bin/env bash
# cpuload.sh: a bounded CPU load for `make test-stress`: N busy loops
# (default 6: a load average near 8 on 2 cores with the suite beside them)
# that end after SECONDS (default 1800) or when this script is stopped.
# Usage: scripts/cpuload.sh [N] [SECONDS]
set -u
n=${1:-6}
secs=${2:-1800}
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap 'stop; exit 0' INT TERM EXIT
for _ in $(seq "$n"); do
  ( end=$((SECONDS + secs)); while [ "$SECONDS" -lt "$end" ]; do :; done ) &
  pids+=($!)
done
wait
