package trial

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEngineLogMasksSecrets: an engine that prints the secrets it was
// given (its HF_TOKEN in a bearer header, its --api-key, a variable of
// --engine-env) leaves none of them in its log, the log is 0600, and
// harmless keys ending in "token" keep their values.
func TestEngineLogMasksSecrets(t *testing.T) {
	const (
		hf  = "hf_AbCdEfGhIjKlMnOpQrStUv"
		key = "sekret-api-key-0042"
	)
	t.Setenv("HF_TOKEN", hf)
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "engine.log")
	e, err := StartEngine(ctx, EngineConfig{
		Command: []string{fakeEngineBin(t), "serve", "fake/model"},
		Flags:   []string{"--fake-echo-secrets", "--api-key", key},
		LogPath: log, StopGrace: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertGone(t, e) })
	if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{hf, key, "AbCdEfGhIjKlMnOp"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("log holds the secret %q:\n%s", s, b)
		}
	}
	for _, s := range []string{"HF_TOKEN=***", "Bearer ***", "api key in use: ***", `"time-to-first-token": "0.042"`} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("log lacks %q:\n%s", s, b)
		}
	}
	if st, err := os.Stat(log); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}

// TestEngineLogCap: an engine flooding stderr leaves at most two files of
// the cap (the newest output kept), and its failure's error text stays
// small.
func TestEngineLogCap(t *testing.T) {
	const capBytes = 1 << 20
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "engine.log")
	e, err := StartEngine(ctx, EngineConfig{
		Command:     []string{fakeEngineBin(t), "serve", "fake/model"},
		Flags:       []string{"--fake-spam-mib", "8", "--fake-fail-log", "ERROR [core.py] the last words"},
		LogPath:     log,
		StopGrace:   500 * time.Millisecond,
		MaxLogBytes: capBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertGone(t, e) })
	err = e.WaitHealthy(ctx, 30*time.Second)
	var ee *EngineError
	if !errors.As(err, &ee) || !errors.Is(err, ErrCrashed) {
		t.Fatalf("WaitHealthy = %v, want a crash", err)
	}
	assertGone(t, e)
	for _, p := range []string{log, log + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Size() > capBytes+4096 {
			t.Errorf("%s is %d bytes, cap %d", p, st.Size(), capBytes)
		}
	}
	b, _ := os.ReadFile(log)
	if !bytes.Contains(b, []byte("the last words")) || !bytes.Contains(b, []byte("log passed")) {
		t.Errorf("the newest output or the rotation note is missing from the log")
	}
	if !strings.Contains(ee.Line, "the last words") {
		t.Errorf("failure line %q, want the engine's last error", ee.Line)
	}
	msg := ee.Error() + "\n" + strings.Join(ee.Tail, "\n")
	if len(msg) > 6<<10 {
		t.Errorf("error text of %d bytes", len(msg))
	}
	if n := len(e.ReadLog()); n > readLogMax {
		t.Errorf("ReadLog returned %d bytes, max %d", n, readLogMax)
	}
}

// TestEngineKilledBySignal: an engine killed by a signal (the OOM killer's
// SIGKILL) says which one.
func TestEngineKilledBySignal(t *testing.T) {
	ctx := context.Background()
	e := startFake(t, ctx, "--fake-kill-self")
	err := e.WaitHealthy(ctx, 10*time.Second)
	var ee *EngineError
	if !errors.As(err, &ee) || ee.Signal == "" || !strings.Contains(err.Error(), "killed by signal 9") {
		t.Fatalf("WaitHealthy = %v (%+v), want the signal named", err, ee)
	}
}

// TestEngineLogDiskFull: output the tuner cannot write (ENOSPC) makes the
// engine's failure an environment failure, not a crash of the config.
func TestEngineLogDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	ctx := context.Background()
	e, err := StartEngine(ctx, EngineConfig{
		Command: []string{fakeEngineBin(t), "serve", "fake/model"},
		Flags:   []string{"--fake-fail-log", "Segmentation fault"},
		LogPath: "/dev/full", StopGrace: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	err = e.WaitHealthy(ctx, 10*time.Second)
	if !errors.Is(err, ErrEnvironment) || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("WaitHealthy = %v, want an environment failure naming the full disk", err)
	}
}

// TestRunnerEngineFailures: per-request KV-cache failures the log explains
// are kv_too_small; an environment failure (exit 120: the engine could not
// write its output) stops the run instead of failing the config.
func TestRunnerEngineFailures(t *testing.T) {
	t.Run("kv too small per request", func(t *testing.T) {
		r, _ := fakeRunner(t, "--fake-http500-log", "ERROR [scheduler.py] KV cache too small: request needs 4096 tokens, 1024 free")
		res, err := r.Run(context.Background(), testConfig(), smallWorkload(true))
		if err != nil {
			t.Fatal(err)
		}
		if res.Failure != FailKVTooSmall {
			t.Errorf("failure %q (%s), want kv_too_small", res.Failure, firstLineOf(res.Error))
		}
	})
	t.Run("environment", func(t *testing.T) {
		r, _ := fakeRunner(t, "--fake-fail-log", "INFO starting", "--fake-exit-code", "120")
		res, err := r.Run(context.Background(), testConfig(), smallWorkload(true))
		if !errors.Is(err, ErrEnvironment) || res.Failure != FailInterrupted {
			t.Errorf("Run = %v, failure %q; want ErrEnvironment and the trial interrupted", err, res.Failure)
		}
	})
}

func firstLineOf(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// FuzzEngineLog: whatever the engine writes, in whatever chunks, no secret
// passed to it reaches the file.
func FuzzEngineLog(f *testing.F) {
	f.Add([]byte("token sekret-value-1 here\nand Bearer abcdefghijkl\n"), 7)
	f.Add(bytes.Repeat([]byte("sekret-value-1"), 10000), 4096)
	f.Fuzz(func(t *testing.T, out []byte, chunk int) {
		const secret = "sekret-value-1"
		chunk = 1 + abs(chunk)%(maxLine+1000)
		p := filepath.Join(t.TempDir(), "e.log")
		l, err := openEngineLog(p, 1<<20, newRedactor([]string{secret}))
		if err != nil {
			t.Fatal(err)
		}
		for b := out; len(b) > 0; {
			n := min(chunk, len(b))
			l.feed(b[:n])
			b = b[n:]
		}
		l.close()
		got, _ := os.ReadFile(p)
		if bytes.Contains(got, []byte(secret)) && !bytes.Contains(out, []byte(secret+secret[:1])) {
			// Masking "***" next to input bytes cannot rebuild the secret
			// unless the input held overlapping copies.
			t.Fatalf("secret in the log:\n%q", got)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
