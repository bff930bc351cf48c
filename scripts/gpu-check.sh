#!/usr/bin/env bash
# gpu-check.sh: on a machine with an NVIDIA GPU, build the trial package's
# NVML sampler (cgo) and print its readings: identity (name, UUIDs,
# driver), three samples per GPU (memory, utilisation, power, energy, SM
# clock, temperature, throttle reasons), the processes holding GPU memory
# and a 1 s summary of the 10 Hz sampler. Output also goes to
# $OUT/gpu-check.txt when OUT is set (device runs). Exit status 0 means
# NVML works through our code.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
{
	echo "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
	if command -v nvidia-smi >/dev/null 2>&1; then
		nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu,clocks.sm,clocks_throttle_reasons.active --format=csv || true
	else
		echo "nvidia-smi: not found"
	fi
} | tee "$out/gpu-check.txt"
if ! command -v go >/dev/null 2>&1; then
	echo "go: not found; build elsewhere with: CGO_ENABLED=1 go test -c -o trial.test ./trial" | tee -a "$out/gpu-check.txt"
	exit 1
fi
export CGO_ENABLED=1
export CGO_CFLAGS="${CGO_CFLAGS:--Wno-deprecated-declarations}"
go test -c -o "$out/trial.test" ./trial
TRIAL_GPU_CHECK=1 "$out/trial.test" -test.run '^TestGPUCheck$' -test.v -test.count=1 2>&1 | tee -a "$out/gpu-check.txt"
exit "${PIPESTATUS[0]}"
