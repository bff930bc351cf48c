package trial

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name       string
		log        string
		exit       int
		duringLoad bool
		want       error
		line       string
	}{
		{"oom deep in log", "(EngineCore_DP0 pid=1) ERROR [core.py] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n" + strings.Repeat("  File \"x.py\", line 1, in f\n", 60) + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n", 1, false, ErrOOM, "CUDA out of memory"},
		{"kv too small beats oom words", "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.31 GiB).\nOutOfMemoryError later\n", 1, false, ErrKVTooSmall, "max seq len"},
		{"v0 kv message", "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648).", 1, false, ErrKVTooSmall, "23648"},
		{"no cache blocks", "Available KV cache memory: -0.3 GiB\nValueError: No available memory for the cache blocks.", 1, false, ErrOOM, "No available memory"},
		{"free memory", "ValueError: Free memory on device (5.01/6.0 GiB) on startup is less than desired GPU memory utilization (0.9, 5.4 GiB).", 1, false, ErrOOM, "Free memory"},
		{"argparse exit 2", "usage: vllm serve [model_tag] [options]\nvllm serve: error: unrecognized arguments: --swap-space 4\n", 2, false, ErrInvalidArgument, "unrecognized arguments"},
		{"invalid choice", "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp4'", 2, false, ErrInvalidArgument, "invalid choice"},
		{"exit 2 without message", "", 2, false, ErrInvalidArgument, ""},
		{"tp divisibility", "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3).", 1, false, ErrInvalidArgument, "divisible"},
		{"batched tokens", "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (8192).", 1, false, ErrInvalidArgument, "smaller than max_model_len"},
		{"crash during load", "INFO ok\nEngineDeadError: EngineCore encountered an issue\n", 1, true, ErrCrashed, "EngineDeadError"},
		{"invalid words during load are a crash", "unrecognized arguments in a request log\nSegfault\n", -1, true, ErrCrashed, "unrecognized"},
		{"unknown", "something\nbad happened\n", 1, false, ErrCrashed, "bad happened"},
		{"root cause above the runtime error", "(EngineCore_DP0 pid=7) INFO [core.py] starting\n(EngineCore_DP0 pid=7) ERROR [core.py] NotImplementedError: Concurrent Partial Prefill is not supported by the V1 engine\n" + strings.Repeat("  File \"x.py\", line 1, in f\n", 45) + "(APIServer pid=6) ERROR [api_server.py] RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n", 1, false, ErrInvalidArgument, "NotImplementedError: Concurrent Partial Prefill"},
		{"engine ERROR line beats a traceback line", "(EngineCore_DP0 pid=7) ERROR [core.py] RuntimeError: CUDA error: an illegal memory access was encountered\nTraceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n", 1, false, ErrCrashed, "illegal memory access"},
		{"unlisted config ValueError", "ERROR [core.py] ValueError: Async scheduling is not supported with pipeline-parallel-size > 1.\nRuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n", 1, false, ErrInvalidArgument, "Async scheduling"},
		{"runtime crash root cause", "INFO ok\nERROR [core.py] EngineCore encountered a fatal error.\nTraceback (most recent call last):\nAssertionError: block table overflow\nERROR [async_llm.py] EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n", 1, true, ErrCrashed, "AssertionError: block table overflow"},
		{"go flag exit 0", "flag provided but not defined: -max-num-seqs\nUsage of vllm-mock:\n  -port int\n", 0, false, ErrInvalidArgument, "flag provided but not defined"},
		{"usage and exit 0", "Usage: mock-server [OPTIONS]\n", 0, false, ErrInvalidArgument, "Usage:"},
		{"cobra unknown flag", "Error: unknown flag: --enable-chunked-prefill\n", 1, false, ErrInvalidArgument, "unknown flag"},
		{"kv too small per request", "INFO ok\nERROR [scheduler.py] request cmpl-7 failed: KV cache too small for 4096 tokens (1024 free)\n", -1, true, ErrKVTooSmall, "KV cache too small"},
		{"v0 block manager", "WARNING Input prompt (9000 tokens) is too long and exceeds the capacity of block_manager\n", -1, true, ErrKVTooSmall, "block_manager"},
		{"disk full", "OSError: [Errno 28] No space left on device: '/root/.cache/vllm/torch_compile_cache'\n", 1, false, ErrEnvironment, "No space left"},
		{"exit 120", "INFO starting\n", 120, false, ErrEnvironment, "exit 120"},
		{"generic line only", "Traceback (most recent call last):\nRuntimeError: Engine core initialization failed. See root cause above.\nexit\n", 1, false, ErrCrashed, "Engine core initialization failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Classify([]byte(tt.log), tt.exit, tt.duringLoad)
			if !errors.Is(e, tt.want) || e.ExitCode != tt.exit {
				t.Fatalf("Classify = %v, want %v", e, tt.want)
			}
			if !strings.Contains(e.Line, tt.line) {
				t.Errorf("line %q, want it to contain %q", e.Line, tt.line)
			}
			if want := Tail([]byte(tt.log), tailLines); !slices.Equal(e.Tail, want) {
				t.Errorf("tail %q, want %q", e.Tail, want)
			}
		})
	}
}

func TestTailAndRedact(t *testing.T) {
	log := []byte("a\n\nb\r\nc token=hf_abcdefghijklmnopqrstu\n\n")
	got := Tail(log, 2)
	if len(got) != 2 || got[0] != "b" || got[1] != "c token=***" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail(log, 10); len(got) != 3 || got[0] != "a" {
		t.Errorf("Tail all = %q", got)
	}
	for in, want := range map[string]string{
		"HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt":  "HF_TOKEN=***",
		"using hf_AbCdEfGhIjKlMnOpQrSt now": "using hf_*** now",
		`{"api_key": "sk-123"}`:             `{"api_key": "***"}`,
		"password: hunter2 ok":              "password: *** ok",
		"no secrets here":                   "no secrets here",
		`{"time-to-first-token": "0.042", "inter_token_latency": "11ms"}`: `{"time-to-first-token": "0.042", "inter_token_latency": "11ms"}`,
		`bos_token="<s>" max_num_batched_tokens=8192`:                     `bos_token="<s>" max_num_batched_tokens=8192`,
		"Authorization: Bearer abcdefghijklmnop rest":                     "Authorization: Bearer *** rest",
		"HF_HUB_DISABLE_IMPLICIT_TOKEN=1 access_token=zzzzzzzz":           "HF_HUB_DISABLE_IMPLICIT_TOKEN=1 access_token=***",
		"url http://127.0.0.1:8000/v1 at 10:00:00":                        "url http://127.0.0.1:8000/v1 at 10:00:00",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseLogFacts(t *testing.T) {
	log := `INFO vLLM API server version 0.10.2
INFO Model loading took 14.99 GiB memory and 6.72 seconds
INFO Available KV cache memory: 55.05 GiB
INFO GPU KV cache size: 450,816 tokens
INFO Maximum concurrency for 8,192 tokens per request: 55.03x
INFO Graph capturing finished in 21 secs, took 0.94 GiB
INFO init engine (profile, create kv cache, warmup model) took 30.12 seconds
`
	f := ParseLogFacts([]byte(log))
	want := LogFacts{Version: "0.10.2", AvailableKVGiB: 55.05, KVCacheTokens: 450816, MaxConcurrency: 55.03, WeightsGiB: 14.99, GraphGiB: 0.94, InitEngineS: 30.12}
	if f != want {
		t.Errorf("facts = %+v\nwant    %+v", f, want)
	}
	if f := ParseLogFacts([]byte("Available KV cache memory: -0.3 GiB")); f.AvailableKVGiB != -0.3 {
		t.Errorf("negative KV memory: %+v", f)
	}
}

func FuzzClassify(f *testing.F) {
	f.Add([]byte("ValueError: No available memory for the cache blocks.\n"), 1, false)
	f.Add([]byte("vllm serve: error: unrecognized arguments: --x\n"), 2, false)
	f.Add([]byte("token=hf_abcdefghijklmnopqrstuvwx\nGPU KV cache size: 1,2,3 tokens\n"), -1, true)
	f.Fuzz(func(t *testing.T, log []byte, exit int, duringLoad bool) {
		e := Classify(log, exit, duringLoad)
		if e == nil || ClassOf(e) == FailNone || len(e.Tail) > tailLines || e.Error() == "" {
			t.Fatalf("Classify = %#v", e)
		}
		if strings.Contains(e.Line, "hf_abcdefghijklmnop") {
			t.Fatalf("secret in line %q", e.Line)
		}
		ParseLogFacts(log)
	})
}

func TestEngineErrorSignal(t *testing.T) {
	e := &EngineError{Kind: ErrCrashed, ExitCode: -1, Signal: "signal 9 (killed)", Line: "last line"}
	if got, want := e.Error(), "engine crashed (killed by signal 9 (killed)): last line"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestTailBoundsLines(t *testing.T) {
	log := []byte(strings.Repeat(strings.Repeat("x", 5000)+"\n", 50))
	tail := Tail(log, tailLines)
	total := 0
	for _, l := range tail {
		total += len(l)
		if len(l) > tailLineMax+3 {
			t.Fatalf("tail line of %d bytes", len(l))
		}
	}
	if len(tail) != tailLines || total > tailLines*(tailLineMax+3) {
		t.Errorf("tail %d lines, %d bytes", len(tail), total)
	}
}

func TestPortLost(t *testing.T) {
	const port = 8123
	for _, tt := range []struct {
		name string
		log  string
		want bool
	}{
		{"python bare", "ERROR [api_server.py:1850] OSError: [Errno 98] Address already in use\n", true},
		{"uvicorn", "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8123): address already in use\n", true},
		{"go server", "2026/12/02 10:00:00 listen tcp 127.0.0.1:8123: bind: address already in use\n", true},
		{"sim", "ERROR 12-02 10:00:00 [api_server.py:1] OSError: [Errno 98] Address already in use (listen tcp 127.0.0.1:8123: bind: address already in use)\n", true},
		{"ipv6", "listen tcp [::1]:8123: bind: address already in use\n", true},
		{"go server other port", "listen tcp 127.0.0.1:9000: bind: address already in use\n", false},
		{"torch distributed", "[W1202 10:00:00.000 socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n" +
			"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n", false},
		{"zmq", "zmq.error.ZMQError: Address already in use (addr: 'tcp://127.0.0.1:5555')\n", false},
		{"unrelated", "INFO listening on port 8123\nERROR something else\n", false},
		{"empty", "", false},
	} {
		if got := PortLost([]byte(tt.log), port); got != tt.want {
			t.Errorf("%s: PortLost = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func FuzzPortLost(f *testing.F) {
	f.Add([]byte("listen tcp 127.0.0.1:8123: bind: address already in use\n"), 8123)
	f.Add([]byte("port: 29500, name: EADDRINUSE\n"), 8000)
	f.Add([]byte("OSError: [Errno 98] Address already in use"), 1)
	f.Fuzz(func(t *testing.T, log []byte, port int) {
		got := PortLost(log, port)
		if got && !reAddrInUse.Match(log) {
			t.Fatalf("PortLost without an address-in-use line: %q", log)
		}
	})
}

// torchPortLog is what torch.distributed prints when its rendezvous port
// is taken (vLLM with tensor parallelism, another job on the host).
const torchPortLog = `[W1202 10:00:00.000 socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n` +
	`torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use`

func TestClassifyDistributedPort(t *testing.T) {
	log := []byte(strings.ReplaceAll(torchPortLog, `\n`, "\n") + "\nERROR [core.py] RuntimeError: Engine core initialization failed. See root cause above.\n")
	e := Classify(log, 1, false)
	var de *DistPortError
	if !errors.As(e, &de) || de.Port != 29500 {
		t.Fatalf("Classify = %v, want a DistPortError on port 29500", e)
	}
	if !errors.Is(e, ErrDistributedPort) || !errors.Is(e, ErrEnvironment) || errors.Is(e, ErrPortInUse) {
		t.Errorf("%v: want ErrDistributedPort and ErrEnvironment, not ErrPortInUse", e)
	}
	if !strings.Contains(e.Error(), "distributed (torch) port 29500 already in use") {
		t.Errorf("message %q does not name the port", e)
	}
	if PortLost(log, 29500) {
		t.Error("a torch.distributed conflict is not a lost API port, even on the same number")
	}
}

// TestFreeMemoryShort: of the OOMs, only a GPU short of free memory for the
// utilisation asked is cured by less utilisation; the result keeps the
// classified line in its error, which is what FreeMemoryShort reads.
func TestFreeMemoryShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  string
		want bool
	}{
		{"free memory", "ValueError: Free memory on device (5.01/6.0 GiB) on startup is less than desired GPU memory utilization (0.9, 5.4 GiB).", true},
		{"cuda oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", false},
		{"no cache blocks", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", false},
		{"kv too small", "ValueError: To serve at least one request with the models's max seq len (8192), (0.50 GiB KV cache is needed, which is larger than the available KV cache memory (0.20 GiB).", false},
	} {
		e := Classify([]byte("INFO starting\n"+tc.log+"\n"), 1, false)
		r := &Result{Status: StatusFailed, Failure: ClassOf(e), Error: e.Error()}
		if got := r.FreeMemoryShort(); got != tc.want {
			t.Errorf("%s: FreeMemoryShort %v, want %v (failure %s, error %q)", tc.name, got, tc.want, r.Failure, r.Error)
		}
	}
	if (&Result{Failure: FailCrashed, Error: "Free memory on device (1/2 GiB) on startup is less than desired"}).FreeMemoryShort() {
		t.Error("a crash whose error quotes the message counts as short of free memory")
	}
}
