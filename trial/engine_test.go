package trial

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func startFake(t *testing.T, ctx context.Context, flags ...string) *Engine {
	t.Helper()
	e, err := StartEngine(ctx, EngineConfig{
		Command:   []string{fakeEngineBin(t), "serve", "fake/model"},
		Flags:     flags,
		LogPath:   filepath.Join(t.TempDir(), "engine.log"),
		StopGrace: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertGone(t, e) })
	return e
}

// assertGone stops the engine and checks /proc and the port.
func assertGone(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if m := GroupMembers(e.PID()); len(m) > 0 {
		t.Errorf("processes of group %d left: %v", e.PID(), m)
	}
	if !PortFree("127.0.0.1", e.Port()) {
		t.Errorf("port %d not free after Stop", e.Port())
	}
}

func TestEngineLifecycle(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
	t.Setenv("FAKE_LEAK", "must-not-pass")
	ctx := context.Background()
	e := startFake(t, ctx, "--max-num-seqs", "64", "--enable-prefix-caching", "--api-key", "sekret")
	if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatalf("WaitHealthy: %v", err)
	}
	if v := e.Version(ctx); v != "0.10.2" {
		t.Errorf("Version = %q", v)
	}
	if m, err := e.ServedModel(ctx); err != nil || m != "fake/model" {
		t.Errorf("ServedModel = %q, %v", m, err)
	}
	if len(e.Members()) == 0 {
		t.Error("no members while running")
	}
	assertGone(t, e)
	log, _ := os.ReadFile(e.LogPath())
	s := string(log)
	if !containsAll(s, "HF_TOKEN set=true", `FAKE_LEAK=""`, "--port", "--api-key ***", "env keys:") {
		t.Errorf("log missing expected lines:\n%s", s)
	}
	if strings.Contains(s, "hf_abcdefghijklmnop") || strings.Contains(s, "sekret") {
		t.Errorf("secret in log:\n%s", s)
	}
}

func TestEngineVersionFromLog(t *testing.T) {
	ctx := context.Background()
	e := startFake(t, ctx, "--fake-no-version-route", "--fake-version", "0.11.0")
	if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := e.Version(ctx); v != "0.11.0" {
		t.Errorf("Version = %q, want 0.11.0 from the log", v)
	}
}

func TestEngineStartupFailures(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		want  error
		line  string
	}{
		{"oom", []string{"--fake-fail-log", `ERROR [core.py] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\nTraceback (most recent call last):\n  File x`}, ErrOOM, "CUDA out of memory"},
		{"no cache blocks", []string{"--fake-fail-log", "INFO Available KV cache memory: -0.3 GiB\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"}, ErrOOM, "No available memory"},
		{"kv too small", []string{"--fake-fail-log", "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.31 GiB)."}, ErrKVTooSmall, "larger than the available KV cache memory"},
		{"free memory", []string{"--fake-fail-log", "ValueError: Free memory on device (5.01/6.0 GiB) on startup is less than desired GPU memory utilization (0.9, 5.4 GiB)."}, ErrOOM, "Free memory on device"},
		{"argparse", []string{"--fake-bad-flag"}, ErrInvalidArgument, "unrecognized arguments"},
		{"config", []string{"--fake-fail-log", "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3)."}, ErrInvalidArgument, "divisible by tensor parallel size"},
		{"unknown", []string{"--fake-fail-log", "Segmentation fault"}, ErrCrashed, "Engine core initialization failed"},
		{"hang", []string{"--fake-hang"}, ErrStartupTimeout, "no /health 200"},
		{"unhealthy", []string{"--fake-unhealthy"}, ErrUnhealthy, "last status 503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := startFake(t, context.Background(), tt.flags...)
			// Only a verdict decided by the deadline waits 1.5 s; one
			// decided by the exit waits at most a hang guard (at load 20
			// nine fakes starting at once took over 1.5 s to exit, and
			// read as startup timeouts). An unhealthy engine is given the
			// deadline once it has answered (it takes as long to listen).
			timeout := time.Minute
			switch tt.want {
			case ErrStartupTimeout:
				timeout = 1500 * time.Millisecond
			case ErrUnhealthy:
				waitAnswer(t, e)
				timeout = 1500 * time.Millisecond
			}
			err := e.WaitHealthy(context.Background(), timeout)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var ee *EngineError
			if !errors.As(err, &ee) || !strings.Contains(ee.Line, tt.line) || len(ee.Tail) == 0 {
				t.Errorf("EngineError = %+v, want line containing %q", ee, tt.line)
			}
			if ClassOf(err) == FailNone {
				t.Errorf("ClassOf = none")
			}
		})
	}
}

// waitAnswer waits until e's /health answers at all (any status).
func waitAnswer(t *testing.T, e *Engine) {
	t.Helper()
	for {
		if resp, err := http.Get(e.BaseURL() + "/health"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-e.Exited():
			t.Fatalf("the engine exited before answering:\n%s", e.ReadLog())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestWaitHealthyExitBeatsSilentListener: the engine dies at once because
// another process holds its port, and that process accepts connections but
// never answers. The exit must decide the verdict, not the probes stuck on
// the other listener (they used to outlast the deadline, and select then
// picked "startup timeout" or the exit at random).
func TestWaitHealthyExitBeatsSilentListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e, err := StartEngine(context.Background(), EngineConfig{
		Command:   []string{fakeEngineBin(t), "serve", "fake/model"},
		Flags:     []string{"--fake-startup-delay", "300ms"}, // a probe is in flight when it exits
		Port:      l.Addr().(*net.TCPAddr).Port,
		LogPath:   filepath.Join(t.TempDir(), "engine.log"),
		StopGrace: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Shorter than one probe's own timeout (2 s): a probe in flight when
	// the process exits must be abandoned. The wait starts once the fake
	// runs (its first log line; starting it took over 1.5 s at load 20),
	// and the verdict is judged by when it exited: before the deadline it
	// must decide, after it (a machine too busy to run the fake's 300 ms
	// in 1.5 s) a startup timeout is right.
	for !strings.Contains(string(e.ReadLog()), "FAKE_LEAK") {
		select {
		case <-e.Exited():
			t.Fatalf("the fake exited before its first line:\n%s", e.ReadLog())
		case <-time.After(10 * time.Millisecond):
		}
	}
	exitAt := make(chan time.Time, 1)
	go func() { <-e.Exited(); exitAt <- time.Now() }()
	const timeout = 1500 * time.Millisecond
	deadline := time.Now().Add(timeout)
	err = e.WaitHealthy(context.Background(), timeout)
	if at := <-exitAt; at.After(deadline) {
		t.Logf("the fake exited %v after the deadline (a busy machine): %v", at.Sub(deadline), err)
	} else if !errors.Is(err, ErrCrashed) || errors.Is(err, ErrStartupTimeout) {
		t.Errorf("err = %v, want ErrCrashed (the engine exited %v before the deadline)", err, deadline.Sub(at))
	}
	l.Close() // Stop waits for the port to be free
	if err := e.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if m := GroupMembers(e.PID()); len(m) > 0 {
		t.Errorf("processes of group %d left: %v", e.PID(), m)
	}
}

func TestEngineStopEscalates(t *testing.T) {
	// The engine ignores SIGTERM and has a child in its group: Stop must
	// SIGKILL the whole group.
	ctx := context.Background()
	e := startFake(t, ctx, "--fake-ignore-sigterm", "--fake-child")
	if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Members()); n < 2 {
		t.Fatalf("members = %d, want engine and child", n)
	}
	t0 := time.Now()
	assertGone(t, e)
	if time.Since(t0) < 400*time.Millisecond {
		t.Errorf("stop took %v: SIGTERM cannot have been ignored for the grace period", time.Since(t0))
	}
	if e.ExitCode() != -1 {
		t.Errorf("exit code %d, want -1 (killed)", e.ExitCode())
	}
}

func TestEngineCrashDuringLoad(t *testing.T) {
	for _, tt := range []struct {
		name string
		log  string
		want error
	}{
		{"crash", "Fatal Python error: Aborted", ErrCrashed},
		{"runtime oom", "ERROR [core.py] EngineCore hit an exception: torch.OutOfMemoryError: CUDA out of memory.", ErrOOM},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := startFake(t, ctx, "--fake-crash-after", "2", "--fake-crash-log", tt.log)
			if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			c := NewClient(e.BaseURL(), "fake/model", 5*time.Second)
			defer c.Close()
			recs := c.Drive(ctx, specsN(4, 8, 2), Load{Concurrency: 1}, nil)
			select {
			case <-e.Exited():
			case <-time.After(5 * time.Second):
				t.Fatal("engine did not exit")
			}
			if recs[0].Err != "" || recs[3].Err == "" {
				t.Errorf("records: %+v", recs)
			}
			if err := e.Failure(true); !errors.Is(err, tt.want) || err.ExitCode != 1 {
				t.Errorf("Failure = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEngineContextCancelStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e := startFake(t, ctx)
	if err := e.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-e.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not stop the engine")
	}
	if e.ExitCode() != 0 {
		t.Errorf("exit code %d, want 0 (graceful SIGTERM)", e.ExitCode())
	}
	if _, err := StartEngine(ctx, EngineConfig{Command: []string{fakeEngineBin(t)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("StartEngine after cancel: %v", err)
	}
}

func TestEngineEnvAllowlist(t *testing.T) {
	env := EngineEnv([]string{"PATH=/bin", "HF_TOKEN=x", "CUDA_VISIBLE_DEVICES=0", "VLLM_USE_V1=1", "AWS_SECRET_ACCESS_KEY=s", "HFX=1", "LC_ALL=C"}, []string{"EXTRA=1"})
	want := "PATH=/bin HF_TOKEN=x CUDA_VISIBLE_DEVICES=0 VLLM_USE_V1=1 LC_ALL=C EXTRA=1"
	if got := strings.Join(env, " "); got != want {
		t.Errorf("EngineEnv = %q, want %q", got, want)
	}
	if got := strings.Join(RedactArgs([]string{"--api-key", "k", "--hf-token=t", "--port", "1"}), " "); got != "--api-key *** --hf-token=*** --port 1" {
		t.Errorf("RedactArgs = %q", got)
	}
}

func TestSecretKey(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"--api-key", true},
		{"--hf-token", true},
		{"HF_TOKEN", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"DB_PASSWORD", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"--credential", true},
		{"--max-num-batched-tokens", false},
		{"--max_num_batched_tokens", false},
		{"--long-prefill-token-threshold", false},
		{"--long_prefill_token_threshold", false},
		{"--port", false},
		{"--keyboard", false},
		{"time-to-first-token", false},
		{"inter_token_latency", false},
		{"bos_token", false},
		{"access_token", true},
		{"hf.token", true},
		{"--tokenizer", false},
		{"MONKEY_BUSINESS", false},
	} {
		if got := SecretName(tt.name); got != tt.want {
			t.Errorf("SecretName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	args := []string{"--max-num-batched-tokens", "8192", "--long-prefill-token-threshold=512", "--api-key", "k", "--hf-token=t"}
	want := "--max-num-batched-tokens 8192 --long-prefill-token-threshold=512 --api-key *** --hf-token=***"
	if got := strings.Join(RedactArgs(args), " "); got != want {
		t.Errorf("RedactArgs = %q, want %q", got, want)
	}
}
