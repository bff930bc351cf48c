#!/bin/sh
# Long reliability soak: the fault matrices, the search through faults and the
# kill/resume test with RELIABILITY_KILLS SIGKILLs, repeated for ROUNDS kill
# schedules (seeds SEED, SEED+1, ...). Prints each round's counts and a total.
#   scripts/soak.sh                 # 20 kills, 1 round
#   ROUNDS=5 RELIABILITY_KILLS=30 scripts/soak.sh
set -eu
cd "$(dirname "$0")/.."
kills=${RELIABILITY_KILLS:-20}
rounds=${ROUNDS:-1}
seed=${SEED:-20261202}
go=${GO:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
total_kills=0 total_lost=0 i=0
while [ "$i" -lt "$rounds" ]; do
	s=$((seed + i))
	echo "== round $((i + 1))/$rounds: $kills kills, seed $s"
	start=$(date +%s)
	if ! RELIABILITY_KILLS=$kills RELIABILITY_SEED=$s $go test -count=1 -timeout 60m -v \
		-run 'TestKillResume|TestSearchSurvivesFaults|TestFaultMatrix|TestRunnerFaultMatrix|TestEngineDiesWithKilledTuner' \
		./reliability/ >"$log" 2>&1; then
		grep -E -- '--- FAIL|_test.go:[0-9]+:' "$log" | head -50
		echo "soak: round $((i + 1)) FAILED (seed $s)"
		exit 1
	fi
	grep -E 'kill test|survived|search through faults' "$log" | sed 's/^ *[a-z_]*_test.go:[0-9]*: /  /'
	k=$(grep -o '[0-9]* kills survived' "$log" | awk '{s += $1} END {print s + 0}')
	l=$(grep -o '[0-9]* lost' "$log" | awk '{s += $1} END {print s + 0}')
	total_kills=$((total_kills + k))
	total_lost=$((total_lost + l))
	echo "  round took $(($(date +%s) - start)) s"
	i=$((i + 1))
done
echo "soak: $rounds round(s), $total_kills kills survived, $total_lost trials lost, 0 orphans"
