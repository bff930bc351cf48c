#!/usr/bin/env bash
# Smoke-tier benchmark gate: start vllm-sim (or point SERVER_URL at a running
# server), run the smoke tier against it, store the run, and on a pull
# request compare it with the last accepted run (a run of the main branch,
# label accepted=true), writing the Markdown comment and JUnit XML to OUT.
#
# Exit status: 0 no regression (or this run is the new baseline), 1 regression,
# 2 the runs could not be compared, 3 inconclusive when ON_INCONCLUSIVE=fail.
# bench compare exits 3 when it found no regression but the runs were too
# noisy to find one of the threshold's size (a minimum detectable effect
# above the threshold): by default that is a warning (a GitHub Actions
# annotation and the report's "Inconclusive" heading), not a failed job.
# The workflow in github-actions.yml calls this script; cmd/tuner's
# TestCISmokeScript runs it as written.
#
# Environment (all optional):
#   TUNER, VLLM_SIM     the binaries (default: on PATH)
#   TUNER_DB            the benchmark database kept between CI runs
#   MODEL, GPU, PORT    what the simulator serves (Llama-3.1-8B on H100, 8199:
#                       a TPOT of about 7 ms; a tiny model's 1.4 ms drowns in timer noise)
#   SIM_ARGS            extra vllm-sim flags (e.g. --slowdown 1.05)
#   SERVER_URL          benchmark this server instead of starting vllm-sim
#   ACCEPTED            true on the main branch: the run becomes the baseline
#   GIT_SHA             stored as label git
#   BENCH_ARGS          extra `tuner bench run` flags (e.g. --matrix FILE)
#   OUT                 where compare.md and junit.xml go (default .)
#   ON_INCONCLUSIVE     warn (default: exit 0 with a warning) or fail (exit 3)
set -euo pipefail

TUNER=${TUNER:-tuner}
VLLM_SIM=${VLLM_SIM:-vllm-sim}
MODEL=${MODEL:-Llama-3.1-8B}
GPU=${GPU:-H100}
PORT=${PORT:-8199}
OUT=${OUT:-.}
ACCEPTED=${ACCEPTED:-false}
ON_INCONCLUSIVE=${ON_INCONCLUSIVE:-warn}
case $ON_INCONCLUSIVE in warn | fail) ;; *) echo "ON_INCONCLUSIVE=$ON_INCONCLUSIVE: want warn or fail" >&2; exit 2 ;; esac
GIT_SHA=${GIT_SHA:-unknown}
mkdir -p "$OUT"

url=${SERVER_URL:-}
if [[ -z $url ]]; then
  # shellcheck disable=SC2086 # SIM_ARGS is a list of flags
  "$VLLM_SIM" serve "$MODEL" --gpu "$GPU" --host 127.0.0.1 --port "$PORT" --startup-scale 0 ${SIM_ARGS:-} \
    >"$OUT/vllm-sim.log" 2>&1 &
  sim_pid=$!
  trap 'kill "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null || true' EXIT
  url="http://127.0.0.1:$PORT"
  for _ in $(seq 1 100); do
    curl -fsS "$url/health" >/dev/null 2>&1 && break
    kill -0 "$sim_pid" 2>/dev/null || { cat "$OUT/vllm-sim.log"; exit 2; }
    sleep 0.2
  done
fi

# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
"$TUNER" bench run --tier smoke --url "$url" --model "$MODEL" --telemetry engine \
  --label "git=$GIT_SHA" --label "accepted=$ACCEPTED" ${BENCH_ARGS:-} >"$OUT/run.txt"

if [[ $ACCEPTED == true ]]; then
  echo "run stored as the new baseline (accepted=true)"
  exit 0
fi
if [[ $("$TUNER" bench list --label accepted=true --json) == null ]]; then
  echo "No accepted baseline run yet: nothing to compare with." | tee "$OUT/compare.md"
  exit 0
fi
set +e
"$TUNER" bench compare --md --junit "$OUT/junit.xml" latest:accepted=true latest >"$OUT/compare.md"
status=$?
set -e
cat "$OUT/compare.md"
if [[ $status == 3 ]]; then
  echo "::warning title=bench gate inconclusive::no regression found, but the runs are too noisy to rule out one of the threshold's size (see compare.md)"
  [[ $ON_INCONCLUSIVE == fail ]] || exit 0
fi
exit "$status"
