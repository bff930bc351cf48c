// Command fakeengine is a tiny stand-in for `vllm serve` used by the trial
// package's tests: it prints vLLM-like log lines, serves /health, /version,
// /v1/models, /metrics and streaming /v1/completions, and misbehaves on
// request (fail at startup, hang, ignore SIGTERM, crash, spawn a child,
// fork a worker that outlives it, and a grandchild that leaves the group,
// flood its log, print secrets, die by a signal).
//
//	fakeengine serve MODEL --host H --port P [--fake-* ...] [any vLLM flag ...]
//	fakeengine worker [PIDFILE]   (the worker --fake-worker starts: sleeps, silent;
//	                               with --fake-escapee it starts a setsid'd grandchild)
//	fakeengine escapee            (that grandchild: sleeps, ignores SIGTERM)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vllm-tuner/tuner/trial/internal/fakestream"
)

type opts struct {
	model, host     string
	port            int
	startupDelay    time.Duration
	failLog         string // printed (\n-separated) before exiting with exitCode
	exitCode        int
	hang            bool // never listen
	ignoreTerm      bool
	crashAfter      int // exit 1 after this many completions requests
	crashLog        string
	child           bool // spawn a sleeping child in the same process group
	worker          bool // re-exec itself as a worker in the group, sharing stdout/stderr (vLLM's engine core)
	spamMiB         int  // write this many MiB of junk to stderr before listening
	echoSecrets     bool // print the secrets it got (HF_TOKEN, --api-key) the ways engines do
	killSelf        bool // SIGKILL itself after the startup delay
	apiKey          string
	gap             time.Duration
	version         string
	noVersionRoute  bool
	memUsed, memTot float64
	unhealthy       bool   // /health answers 503
	http500         bool   // every completion fails
	http500Log      string // printed to stderr for each failed completion
	maxModelLen     int    // --max-model-len: longer requests get vLLM's HTTP 400
	portRace        string // marker file: the first start (no marker yet) loses its port
	pidFile         string // "leader P", "worker P", "escapee P" and "load" (first completion) appended here
	escapee         bool   // the worker starts a grandchild in its own session (out of the group)
}

func parse(args []string) (opts, error) {
	o := opts{host: "127.0.0.1", exitCode: 1, version: "0.10.2", memUsed: 72e9, memTot: 80e9}
	if len(args) < 2 || args[0] != "serve" {
		return o, fmt.Errorf("usage: fakeengine serve MODEL [flags]")
	}
	o.model = args[1]
	for i := 2; i < len(args); i++ {
		a := args[i]
		val := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		var err error
		switch a {
		case "--host":
			o.host = val()
		case "--port":
			o.port, err = strconv.Atoi(val())
		case "--fake-startup-delay":
			o.startupDelay, err = time.ParseDuration(val())
		case "--fake-fail-log":
			o.failLog = val()
		case "--fake-exit-code":
			o.exitCode, err = strconv.Atoi(val())
		case "--fake-hang":
			o.hang = true
		case "--fake-ignore-sigterm":
			o.ignoreTerm = true
		case "--fake-crash-after":
			o.crashAfter, err = strconv.Atoi(val())
		case "--fake-crash-log":
			o.crashLog = val()
		case "--fake-child":
			o.child = true
		case "--fake-worker":
			o.worker = true
		case "--fake-escapee":
			o.worker, o.escapee = true, true
		case "--fake-pid-file":
			o.pidFile = val()
		case "--fake-spam-mib":
			o.spamMiB, err = strconv.Atoi(val())
		case "--fake-echo-secrets":
			o.echoSecrets = true
		case "--fake-kill-self":
			o.killSelf = true
		case "--api-key":
			o.apiKey = val()
		case "--fake-gap":
			o.gap, err = time.ParseDuration(val())
		case "--fake-version":
			o.version = val()
		case "--fake-no-version-route":
			o.noVersionRoute = true
		case "--fake-port-race":
			o.portRace = val()
		case "--fake-http500":
			o.http500 = true
		case "--fake-http500-log":
			o.http500, o.http500Log = true, val()
		case "--fake-unhealthy":
			o.unhealthy = true
		case "--max-model-len":
			o.maxModelLen, err = strconv.Atoi(val())
		case "--fake-bad-flag":
			return o, fmt.Errorf("error: unrecognized arguments: --fake-bad-flag")
		default:
			// vLLM flags: take a value unless the next word is a flag.
			if strings.HasPrefix(a, "--") && !strings.HasPrefix(a, "--no-") && !strings.HasPrefix(a, "--enable-") &&
				a != "--enforce-eager" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
			}
		}
		if err != nil {
			return o, fmt.Errorf("argument %s: %v", a, err)
		}
	}
	return o, nil
}

// note appends one line to the pid file (one write: lines of several
// processes do not interleave).
func note(path, format string, a ...any) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pid file:", err)
		return
	}
	fmt.Fprintf(f, format+"\n", a...)
	f.Close()
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "worker" || os.Args[1] == "escapee") {
		// A worker in the engine's process group: no Pdeathsig, so it
		// outlives a SIGKILLed engine leader like vLLM's engine core does.
		// The escapee leaves the group too (setsid), as a daemonising
		// helper would: only a subreaper above it can still find it.
		signal.Ignore(syscall.SIGTERM)
		if os.Args[1] == "worker" && len(os.Args) > 2 {
			c := exec.Command(os.Args[0], "escapee")
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "escapee:", err)
			} else {
				note(os.Args[2], "escapee %d", c.Process.Pid)
			}
		}
		for {
			time.Sleep(time.Hour)
		}
	}
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "vllm: "+err.Error())
		os.Exit(2)
	}
	fmt.Printf("INFO 12-02 10:00:00 [api_server.py:1] vLLM API server version %s\n", o.version)
	fmt.Printf("INFO 12-02 10:00:00 [utils.py:1] non-default args: {'model': '%s'}\n", o.model)
	fmt.Printf("INFO secret check: HF_TOKEN set=%v\n", os.Getenv("HF_TOKEN") != "")
	fmt.Printf("INFO env FAKE_LEAK=%q\n", os.Getenv("FAKE_LEAK"))
	sigs := make(chan os.Signal, 4)
	if o.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	}
	if o.child {
		c := exec.Command("sleep", "300")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
		} else {
			fmt.Printf("INFO (EngineCore_DP0 pid=%d) started\n", c.Process.Pid)
		}
	}
	note(o.pidFile, "leader %d", os.Getpid())
	if o.worker {
		c := exec.Command(os.Args[0], "worker")
		if o.escapee {
			c.Args = append(c.Args, o.pidFile)
		}
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
		} else {
			fmt.Printf("INFO (EngineCore_DP0 pid=%d) worker started\n", c.Process.Pid)
			note(o.pidFile, "worker %d", c.Process.Pid)
		}
	}
	if o.echoSecrets {
		fmt.Printf("DEBUG env HF_TOKEN=%s\n", os.Getenv("HF_TOKEN"))
		fmt.Printf("DEBUG GET https://huggingface.co/api/models headers={'Authorization': 'Bearer %s'}\n", os.Getenv("HF_TOKEN"))
		fmt.Fprintf(os.Stderr, "WARNING api key in use: %s (from --api-key)\n", o.apiKey)
		fmt.Println(`INFO metrics {"time-to-first-token": "0.042", "inter_token_latency": 0.011}`)
	}
	if o.spamMiB > 0 {
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for range o.spamMiB << 10 {
			os.Stderr.Write(line)
		}
	}
	time.Sleep(o.startupDelay)
	if o.killSelf {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if o.failLog != "" {
		for _, l := range strings.Split(o.failLog, `\n`) {
			fmt.Fprintln(os.Stderr, l)
		}
		fmt.Fprintln(os.Stderr, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		os.Exit(o.exitCode)
	}
	if o.hang {
		holdPort(o.host, o.port)
		if o.ignoreTerm {
			for {
				time.Sleep(time.Hour) // not select{}: without cgo the runtime would call that a deadlock
			}
		}
		<-sigs
		os.Exit(0)
	}
	fmt.Println("INFO [kv_cache_utils.py:1] GPU KV cache size: 450,816 tokens")
	fmt.Println("INFO [kv_cache_utils.py:1] Maximum concurrency for 8,192 tokens per request: 55.03x")
	if o.portRace != "" {
		if _, err := os.Stat(o.portRace); err != nil {
			os.WriteFile(o.portRace, nil, 0o644)
			fmt.Fprintln(os.Stderr, "ERROR [api_server.py] OSError: [Errno 98] Address already in use")
			os.Exit(1)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	var served atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if o.unhealthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	if !o.noVersionRoute {
		mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"version":%q}`, o.version)
		})
	}
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","root":%q,"max_model_len":8192}]}`, o.model, o.model)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=%q} 0.25\n", o.model)
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=%q} 3\n", o.model)
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=%q} 1\n", o.model)
		fmt.Fprintf(w, "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{engine=\"0\",model_name=%q} %d\n", o.model, served.Load())
		fmt.Fprintf(w, "# TYPE vllm_sim:gpu_memory_used_bytes gauge\nvllm_sim:gpu_memory_used_bytes{gpu=\"0\"} %g\n", o.memUsed)
		fmt.Fprintf(w, "# TYPE vllm_sim:gpu_memory_total_bytes gauge\nvllm_sim:gpu_memory_total_bytes{gpu=\"0\"} %g\n", o.memTot)
	})
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt    []int `json:"prompt"`
			MaxTokens int   `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if o.http500 {
			if o.http500Log != "" {
				fmt.Fprintln(os.Stderr, o.http500Log)
			}
			http.Error(w, `{"error":{"message":"EngineDeadError","code":500}}`, 500)
			return
		}
		if n := len(req.Prompt) + req.MaxTokens; o.maxModelLen > 0 && n > o.maxModelLen {
			http.Error(w, fmt.Sprintf(`{"object":"error","message":"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion).","type":"BadRequestError","code":400}`,
				o.maxModelLen, n, len(req.Prompt), req.MaxTokens), 400)
			return
		}
		n := served.Add(1)
		if n == 1 {
			note(o.pidFile, "load")
		}
		if o.crashAfter > 0 && n > int64(o.crashAfter) {
			for _, l := range strings.Split(o.crashLog, `\n`) {
				fmt.Fprintln(os.Stderr, l)
			}
			os.Exit(1)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := []byte(`data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" t","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}` + "\n\n")
		if !fakestream.Tokens(r.Context(), w, ev, req.MaxTokens, o.gap) {
			return
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n",
			len(req.Prompt), req.MaxTokens, len(req.Prompt)+req.MaxTokens)
	})
	srv := &http.Server{Handler: mux}
	go func() {
		<-sigs
		fmt.Println("INFO Shutting down")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		os.Exit(0)
	}()
	fmt.Println("INFO Application startup complete.")
	srv.Serve(l)
}

// holdPort binds the engine's port without listening on it: connections
// are refused, as by an engine still loading, and no other process can
// take the port and answer in its place (under load a fake of another
// test did: the hang read "engine unhealthy (last status 503)" instead of
// a startup timeout). Without SO_REUSEADDR no other socket may bind it.
func holdPort(host string, port int) {
	ip := net.ParseIP(host).To4()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if ip == nil || err != nil {
		return
	}
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], ip)
	if err := syscall.Bind(fd, sa); err != nil {
		fmt.Fprintln(os.Stderr, "hold port:", err)
	}
}
