package reliability

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Secret values planted in the environment and flags; none may be written
// anywhere by the tuner.
const (
	secretHF     = "secret-xyz-hf-0001"
	secretAWS    = "secret-aws-0002"
	secretEngine = "secret-engine-env-0003"
)

// environOf reads a live process's environment from /proc.
func environOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/environ")
	if err != nil {
		t.Fatalf("environ of %d: %v", pid, err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestEngineEnvAllowlist starts a real vllm-sim through trial.StartEngine
// with secrets in the tuner's environment and reads the engine's
// environment from /proc: allowlisted names pass, others do not; the
// command is run directly (no shell in between); the log names env keys,
// never values.
func TestEngineEnvAllowlist(t *testing.T) {
	sim := bin(t, "vllm-sim")
	t.Setenv("HF_TOKEN", secretHF)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secretAWS)
	t.Setenv("VLLM_LOGGING_LEVEL", "INFO")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	t.Setenv("RELIABILITY_UNLISTED", "x")
	log := filepath.Join(t.TempDir(), "engine.log")
	ctx := context.Background()
	e, err := trial.StartEngine(ctx, trial.EngineConfig{
		Command: []string{sim, "serve", "tiny", "--gpu", simGPU, "--startup-scale", "0.01"},
		Env:     []string{"HF_HOME=/tmp/hf-home"},
		LogPath: log, StopGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	env := environOf(t, e.PID())
	for k, want := range map[string]string{"HF_TOKEN": secretHF, "VLLM_LOGGING_LEVEL": "INFO", "CUDA_VISIBLE_DEVICES": "0", "HF_HOME": "/tmp/hf-home", "PATH": os.Getenv("PATH")} {
		if env[k] != want {
			t.Errorf("engine env %s = %q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "RELIABILITY_UNLISTED", childEnv} {
		if _, ok := env[k]; ok {
			t.Errorf("engine env has %s: not on the allowlist", k)
		}
	}
	// No shell between the tuner and the engine: the group leader is the
	// engine binary itself.
	if argv := procArgv(e.PID()); len(argv) == 0 || argv[0] != sim {
		t.Errorf("engine process runs %q, want %s directly", argv, sim)
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(secretHF)) || bytes.Contains(b, []byte(secretAWS)) {
		t.Errorf("trial log holds a secret value")
	}
	if !bytes.Contains(b, []byte("env keys:")) || !bytes.Contains(b, []byte("HF_TOKEN")) {
		t.Errorf("trial log does not list the env keys passed")
	}
}

func procArgv(pid int) []string {
	for _, p := range proctest.Scan() {
		if p.PID == pid {
			return p.Argv
		}
	}
	return nil
}

// TestSecretsNeverWritten runs `tuner search --engine sim` with secrets in
// the environment and in --engine-env, the engine wrapped by a script that
// records the environment it got, and greps every file the tuner wrote (the
// database, trial logs, raw data) and its output for the secret values.
func TestSecretsNeverWritten(t *testing.T) {
	if msg, ok := simEngineWired(t, writeTinyWorkload(t)); !ok {
		t.Skipf("--engine sim not available: %s", msg)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "engine-env.txt")
	wrapper := filepath.Join(dir, "engine-wrapper")
	// The wrapper is the test's probe, not the tuner's: the tuner execs it
	// directly like any engine binary.
	script := "#!/bin/sh\nenv > '" + dump + "'\nprintf '%s\\n' \"$@\" > '" + dir + "/args.'$$\nexec '" + bin(t, "vllm-sim") + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "tuner.db")
	logs := filepath.Join(dir, "logs")
	env := []string{"HF_TOKEN=" + secretHF, "AWS_SECRET_ACCESS_KEY=" + secretAWS}
	r := runTuner(t, 2*time.Minute, env, "--db", db, "--verbose", "search", "--engine", "sim", "--vllm-sim", wrapper, "--model", "tiny", "--gpu", simGPU,
		"--workload", writeTinyWorkload(t), "--trials", "2", "--repeats", "1", "--log-dir", logs,
		"--engine-arg=--startup-scale=0.01", "--engine-env", "HF_TOKEN="+secretEngine)
	if r.code != 0 {
		t.Fatalf("search: exit %d\n%s", r.code, r.stderr)
	}
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the engine wrapper did not run: %v", err)
	}
	if !bytes.Contains(got, []byte("HF_TOKEN="+secretEngine+"\n")) {
		t.Errorf("engine did not get --engine-env HF_TOKEN (its env:\n%s)", got)
	}
	if bytes.Contains(got, []byte(secretAWS)) {
		t.Errorf("engine got AWS_SECRET_ACCESS_KEY (not on the allowlist)")
	}
	checkEngineArgs(t, dir)
	files := 0
	check := func(where string, b []byte) {
		for _, s := range []string{secretHF, secretAWS, secretEngine} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds the secret %q", where, s)
			}
		}
	}
	check("tuner stdout", []byte(r.stdout))
	check("tuner stderr", []byte(r.stderr))
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == dump || p == wrapper || strings.HasPrefix(filepath.Base(p), "args.") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".gz") {
			if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
				if u, err := io.ReadAll(zr); err == nil {
					b = u
				}
			}
		}
		files++
		check(p, b)
		return nil
	})
	if files < 3 {
		t.Errorf("only %d files written under %s: expected the database and trial logs", files, dir)
	}
	// The reading commands print what the store holds.
	for _, args := range [][]string{{"trials", "--json"}, {"db", "export", "--format", "jsonl"}} {
		r := runTuner(t, time.Minute, nil, append([]string{"--db", db}, args...)...)
		check("tuner "+strings.Join(args, " "), []byte(r.stdout+r.stderr))
	}
}

// TestDryRunHidesSecrets: --dry-run prints the engine environment and the
// command lines it would run; values of secret names (HF_TOKEN, --api-key)
// must be masked there, while the names stay visible.
func TestDryRunHidesSecrets(t *testing.T) {
	r := runTuner(t, time.Minute, nil, "--db", filepath.Join(t.TempDir(), "x.db"), "search", "--engine", "sim-virtual", "--model", "tiny", "--gpu", simGPU,
		"--workload", tinyWorkload, "--dry-run", "--proposals", "1", "--engine-env", "HF_TOKEN="+secretEngine, "--engine-arg=--api-key="+secretAWS)
	if r.code != 0 {
		t.Fatalf("dry run: exit %d\n%s", r.code, r.stderr)
	}
	out := r.stdout + r.stderr
	for _, s := range []string{secretEngine, secretAWS} {
		if strings.Contains(out, s) {
			t.Errorf("--dry-run prints the secret %q", s)
		}
	}
	for _, s := range []string{"HF_TOKEN=", "--api-key"} {
		if !strings.Contains(out, s) {
			t.Errorf("--dry-run does not show %s (masked)", s)
		}
	}
}

// checkEngineArgs reads the argument lists the engine wrapper recorded: each
// is the sim's base command, then only flags of the search space, then the
// --engine-arg values, then the tuner's own --host 127.0.0.1 --port P.
func checkEngineArgs(t *testing.T, dir string) {
	t.Helper()
	space, err := spaces.Default()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "args.*"))
	if len(files) == 0 {
		t.Fatal("the engine wrapper recorded no arguments")
	}
	base := []string{"serve", "tiny", "--gpu", simGPU, "--gpu-count", "1"}
	extra := []string{"--startup-scale=0.01"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		n := len(args)
		if n < len(base)+len(extra)+4 || strings.Join(args[:len(base)], " ") != strings.Join(base, " ") {
			t.Errorf("engine args %q: want %q first", args, base)
			continue
		}
		if args[n-4] != "--host" || args[n-3] != "127.0.0.1" || args[n-2] != "--port" {
			t.Errorf("engine args %q: want --host 127.0.0.1 --port P last", args)
			continue
		}
		mid := args[len(base) : n-4]
		if got := mid[len(mid)-len(extra):]; strings.Join(got, " ") != strings.Join(extra, " ") {
			t.Errorf("engine args %q: --engine-arg values %q not right before --host", args, extra)
			continue
		}
		if _, err := space.ParseFlags(mid[:len(mid)-len(extra)]); err != nil {
			t.Errorf("engine got flags outside the search space: %v (args %q)", err, args)
		}
	}
}
