package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vllm-tuner/tuner/spaces"
)

// Errors Serve returns after a start; cmd/vllm-sim maps them to exit 1.
var (
	ErrCrashed    = errors.New("engine core died unexpectedly")
	ErrEngineDead = errors.New("engine core encountered an issue (EngineDeadError)")
)

// ServeOption configures Serve.
type ServeOption func(*serveHooks)

type serveHooks struct {
	ready func(addr string)
	drain time.Duration
}

// OnReady is called with the listening address once the server is healthy.
func OnReady(f func(addr string)) ServeOption { return func(h *serveHooks) { h.ready = f } }

// DrainTimeout bounds how long a SIGTERM waits for in-flight requests.
func DrainTimeout(d time.Duration) ServeOption { return func(h *serveHooks) { h.drain = d } }

// defaultDrain bounds the wait for in-flight requests after SIGTERM. With
// none in flight the server stops at once: http.Server.Shutdown would wait
// up to 5 s for connections opened but not yet used (a client's pool), which
// made every engine stop of a search take 1-5 s.
const defaultDrain = time.Second

// vlog writes vLLM-style log lines.
type vlog struct {
	mu  sync.Mutex
	w   io.Writer
	pid int
}

func (l *vlog) line(proc, level, file, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "(%s pid=%d) %s %s [%s] %s\n", proc, l.pid, level, time.Now().Format("01-02 15:04:05"), file, msg)
}

func (l *vlog) api(file, msg string)    { l.line("APIServer", "INFO", file, msg) }
func (l *vlog) engine(file, msg string) { l.line("EngineCore_DP0", "INFO", file, msg) }
func (l *vlog) engineErr(msg string)    { l.line("EngineCore_DP0", "ERROR", "core.py", msg) }

// failStartup prints a startup failure the way vLLM V1 does: the engine
// core's root cause, then the API server's RuntimeError.
func (l *vlog) failStartup(se *StartupError) {
	for _, ln := range se.Lines {
		if strings.HasPrefix(ln, "Available KV cache memory") {
			l.line("EngineCore_DP0", "INFO", "gpu_worker.py", ln)
			continue
		}
		l.engineErr(ln)
	}
	l.line("APIServer", "ERROR", "api_server.py", "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
}

// server is one running simulated vLLM.
type server struct {
	o         ServeOptions
	target    spaces.Target
	args      EngineArgs
	plan      MemoryPlan
	log       *vlog
	engines   []*liveEngine
	calib     Calib
	tuned     float64 // the host's gain from tuning flags (Host.Effective)
	metrics   *serverMetrics
	served    string
	nested    bool // nested error JSON (>= 0.10.1)
	oldLenMsg bool
	rr        atomic.Uint64
	received  atomic.Int64
	finished  atomic.Int64
	nextID    atomic.Uint64
	dead      atomic.Bool
	inflight  atomic.Int64 // HTTP requests being handled
	fatal     chan error
	rngMu     sync.Mutex
	rng       *rand.Rand
}

// Serve runs the simulated `vllm serve` until ctx is done (SIGTERM: drain
// in-flight requests briefly, return nil). A startup failure is printed
// like vLLM's and returned as a *StartupError; injected crashes return
// ErrCrashed or ErrEngineDead. The port is not listened on before the
// engine has "loaded".
func Serve(ctx context.Context, o ServeOptions, logw io.Writer, opts ...ServeOption) error {
	hooks := serveHooks{drain: defaultDrain}
	for _, f := range opts {
		f(&hooks)
	}
	lg := &vlog{w: logw, pid: os.Getpid()}
	lg.api("api_server.py", "vLLM API server version "+o.Version)
	lg.api("utils.py", "non-default args: "+nonDefaultArgs(o))
	if ln := UnmodelledLine(o.Engine); ln != "" {
		lg.line("APIServer", "WARNING", "vllm_sim.py", ln)
	}

	s, se := newServer(o, lg)
	if se != nil {
		lg.failStartup(se)
		return se
	}
	a, t := s.args, s.target
	phases := StartupPhases(t, a, s.plan)
	lines := SuccessLines(t, a, s.plan)
	for _, ph := range phases {
		if err := sleepCtx(ctx, time.Duration(ph.Seconds*o.StartupScale*float64(time.Second))); err != nil {
			lg.api("launcher.py", "Shutting down during startup.")
			return nil
		}
		for _, ln := range lines[ph.Name] {
			file := "core.py"
			switch ph.Name {
			case "load_weights":
				file = "gpu_model_runner.py"
			case "profile":
				file = "gpu_worker.py"
				if strings.HasPrefix(ln, "GPU KV cache") || strings.HasPrefix(ln, "Maximum concurrency") {
					file = "kv_cache_utils.py"
				}
			case "cuda_graphs":
				file = "gpu_model_runner.py"
			case "torch_compile":
				file = "backends.py"
			}
			lg.engine(file, ln)
		}
		if o.Faults.StartupFail && ph.Name == "load_weights" {
			se := &StartupError{Kind: ErrStartupFault, Lines: []string{"RuntimeError: CUDA error: an illegal memory access was encountered (simulated by --fault-startup-fail)"}}
			lg.failStartup(se)
			return se
		}
	}
	if o.Faults.HangBeforeHealthy {
		lg.engine("core.py", "Waiting for the engine to become ready (it will not: --fault-hang-before-healthy)")
		<-ctx.Done()
		return nil
	}

	host := o.Host
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(o.Port)))
	if err != nil {
		lg.line("APIServer", "ERROR", "api_server.py", fmt.Sprintf("OSError: [Errno 98] Address already in use (%v)", err))
		return fmt.Errorf("listen: %w", err)
	}
	shown := host
	if shown == "" {
		shown = "0.0.0.0"
	}
	addr := ln.Addr().(*net.TCPAddr)
	lg.api("api_server.py", fmt.Sprintf("Starting vLLM API server 0 on http://%s:%d", shown, addr.Port))
	lg.api("launcher.py", "Available routes are: /health, /ping, /version, /v1/models, /v1/completions, /v1/chat/completions, /metrics, /reset_prefix_cache")
	lg.api("server.py", fmt.Sprintf("Started server process [%d]", os.Getpid()))
	lg.api("on.py", "Waiting for application startup.")
	lg.api("on.py", "Application startup complete.")

	engCtx, stopEngines := context.WithCancel(context.Background())
	defer stopEngines()
	var wg sync.WaitGroup
	for _, le := range s.engines {
		wg.Add(1)
		go func() { defer wg.Done(); le.run(engCtx) }()
	}
	defer wg.Wait()
	if !o.DisableLogStats {
		wg.Add(1)
		go func() { defer wg.Done(); s.logStats(engCtx) }()
	}
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if hooks.ready != nil {
		hooks.ready(addr.String())
	}
	select {
	case <-ctx.Done():
		lg.api("launcher.py", "Shutting down FastAPI HTTP server.")
		ln.Close() // no new connections
		srv.SetKeepAlivesEnabled(false)
		s.drainRequests(hooks.drain)
		srv.Close()
		stopEngines()
		return nil
	case err := <-s.fatal:
		srv.Close()
		stopEngines()
		return err
	case err := <-served:
		stopEngines()
		return fmt.Errorf("http server: %w", err)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nonDefaultArgs renders the non-default args like vLLM's startup line.
func nonDefaultArgs(o ServeOptions) string {
	parts := []string{fmt.Sprintf("'model_tag': '%s'", o.Model)}
	if o.Port != 8000 {
		parts = append(parts, fmt.Sprintf("'port': %d", o.Port))
	}
	if o.Host != "" {
		parts = append(parts, fmt.Sprintf("'host': '%s'", o.Host))
	}
	for _, n := range o.Engine.Names() {
		v, _ := o.Engine.Get(n)
		switch v.Kind() {
		case spaces.Categorical:
			parts = append(parts, fmt.Sprintf("'%s': '%s'", n, v.Str()))
		case spaces.Bool:
			parts = append(parts, fmt.Sprintf("'%s': %s", n, pyBool(v.Bool())))
		default:
			parts = append(parts, fmt.Sprintf("'%s': %s", n, v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// newServer resolves profiles, arguments and memory; a failure is a
// *StartupError to print.
func newServer(o ServeOptions, lg *vlog) (*server, *StartupError) {
	cat := spaces.DefaultCatalog()
	if o.Profiles != "" {
		c, err := spaces.LoadCatalogFile(o.Profiles)
		if err != nil {
			return nil, &StartupError{Kind: ErrInvalidArgument, Lines: []string{"ValueError: " + err.Error()}}
		}
		cat = c
	}
	model, _, err := cat.ModelOrHF(o.Model, o.HFCache)
	if err != nil {
		return nil, &StartupError{Kind: ErrInvalidArgument, Lines: []string{fmt.Sprintf(
			"OSError: %s is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models' (simulator: %v)", o.Model, err)}}
	}
	gpu, err := cat.GPU(o.GPU)
	if err != nil {
		return nil, &StartupError{Kind: ErrInvalidArgument, Lines: []string{"RuntimeError: " + err.Error()}}
	}
	count := o.GPUCount
	if count <= 0 {
		count = spaces.LayoutOf(o.Engine).GPUs()
	}
	t := spaces.Target{Model: model, GPU: gpu, GPUCount: count, EngineVersion: o.Version}
	engine, tuned := o.Machine.Effective(t, o.Engine)
	a, err := ResolveArgs(t, engine)
	if err != nil {
		var se *StartupError
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, &StartupError{Kind: ErrInvalidArgument, Lines: []string{"ValueError: " + err.Error()}}
	}
	t.MaxModelLen = a.MaxModelLen
	if se := applyLoRAOptions(&a, o.LoRA); se != nil {
		return nil, se
	}
	if se := a.Validate(t); se != nil {
		return nil, se
	}
	plan, se := PlanMemory(t, a)
	if se != nil {
		return nil, se
	}
	if o.NumGPUBlocks > 0 {
		lg.engine("gpu_worker.py", fmt.Sprintf("Overriding num_gpu_blocks=%d with num_gpu_blocks_override=%d", plan.NumBlocks, o.NumGPUBlocks))
		plan.NumBlocks = o.NumGPUBlocks
		plan.KVTokens = plan.NumBlocks * a.BlockSize
		plan.MaxConcurrency = float64(plan.NumBlocks) / float64(ceilDiv(a.MaxModelLen, a.BlockSize))
		if plan.NumBlocks < ceilDiv(a.MaxModelLen, a.BlockSize) {
			return nil, &StartupError{Kind: ErrKVTooSmall, Lines: []string{fmt.Sprintf(
				"ValueError: The model's max seq len (%d) is larger than the maximum number of tokens that can be stored in KV cache (%d). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", a.MaxModelLen, plan.KVTokens)}}
		}
	}
	s := &server{o: o, target: t, args: a, plan: plan, log: lg, fatal: make(chan error, 1),
		rng: rand.New(rand.NewPCG(o.Seed, 0xfa017))}
	s.served = o.Model
	if o.ServedModelName != "" {
		s.served = o.ServedModelName
	}
	s.nested = atLeast(o.Version, "0.10.1")
	s.oldLenMsg = !atLeast(o.Version, "0.10")
	calib := CalibFor(gpu)
	s.calib, s.tuned = calib, tuned
	scale := o.TimeScale * o.Faults.SlowTokens
	if scale <= 0 {
		scale = 1
	}
	views := make([]engineView, a.DataParallelSize)
	for i := 0; i < a.DataParallelSize; i++ {
		e := NewEngine(t, a, calib, plan, WithNoise(o.Seed+uint64(i)*7919), WithSlowdown(o.Slowdown/tuned), WithSpeed(o.hostSpeed()))
		le := newLiveEngine(e, scale)
		s.engines = append(s.engines, le)
		views[i] = le
	}
	s.metrics = newServerMetrics(o.Version, s.served, a, plan, gpu, views)
	for _, le := range s.engines {
		le.onIt = func(n int) { s.metrics.iterTokens.Observe(float64(n)) }
	}
	return s, nil
}

func atLeast(version, v string) bool {
	c, err := spaces.CompareVersions(version, v)
	return err == nil && c >= 0
}

func (s *server) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64() < p
}

// eosLength draws where the model would emit EOS: geometric with mean 256.
func (s *server) eosLength() int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return 1 + int(s.rng.ExpFloat64()*255)
}

// drainRequests waits until no request is in flight, at most d.
func (s *server) drainRequests(d time.Duration) {
	deadline := time.Now().Add(d)
	for s.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *server) routes() http.Handler {
	mux := s.mux()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		mux.ServeHTTP(w, r)
	})
}

func (s *server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.handleHealth)
	mux.HandleFunc("/ping", s.handleHealth)
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"version": s.o.Version})
	})
	mux.HandleFunc("/v1/models", s.handleModels)
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/v1/completions", s.handleGenerate(false))
	mux.HandleFunc("/v1/chat/completions", s.handleGenerate(true))
	mux.HandleFunc("/reset_prefix_cache", s.handleResetPrefixCache)
	return mux
}

func (s *server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.dead.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleModels lists the base model, then each LoRA adapter as a model
// whose root is its path and parent the base model (vLLM's
// OpenAIServingModels.show_available_models).
func (s *server) handleModels(w http.ResponseWriter, r *http.Request) {
	now := time.Now().Unix()
	perm := []any{map[string]any{"id": "modelperm-sim", "object": "model_permission", "created": now,
		"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true, "allow_search_indices": false,
		"allow_view": true, "allow_fine_tuning": false, "organization": "*", "group": nil, "is_blocking": false}}
	data := []any{map[string]any{
		"id": s.served, "object": "model", "created": now, "owned_by": "vllm", "root": s.o.Model,
		"parent": nil, "max_model_len": s.args.MaxModelLen, "permission": perm,
	}}
	for _, l := range s.args.LoRAModules {
		parent := s.served
		if l.BaseModelName != "" {
			parent = l.BaseModelName
		}
		data = append(data, map[string]any{"id": l.Name, "object": "model", "created": now, "owned_by": "vllm",
			"root": l.Path, "parent": parent, "max_model_len": nil, "permission": perm})
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": data})
}

// adapterIndex is the engine's 1-based index of the LoRA adapter served as
// model, 0 when model is no adapter.
func (s *server) adapterIndex(model string) int {
	for i, l := range s.args.LoRAModules {
		if l.Name == model {
			return i + 1
		}
	}
	return 0
}

// applyLoRAOptions moves the LoRA server flags into the engine arguments
// and reads each adapter's rank from its adapter_config.json, failing
// startup as vLLM's init_static_loras does.
func applyLoRAOptions(a *EngineArgs, o LoRAOptions) *StartupError {
	a.EnableLoRA, a.MaxCPULoras = o.Enable, o.MaxCPULoras
	if len(o.Modules) > 0 && !o.Enable {
		return &StartupError{Kind: ErrInvalidArgument, Lines: []string{"RuntimeError: LoRA is not enabled. Use --enable-lora to enable LoRA."}}
	}
	a.LoRAModules = append([]LoRAModule(nil), o.Modules...)
	for i := range a.LoRAModules {
		if a.LoRAModules[i].Rank > 0 {
			continue
		}
		r, err := readAdapterRank(a.LoRAModules[i].Path)
		if err != nil {
			return &StartupError{Kind: ErrInvalidArgument, Lines: []string{"ValueError: " + err.Error()}}
		}
		a.LoRAModules[i].Rank = r
	}
	return nil
}

func (s *server) handleResetPrefixCache(w http.ResponseWriter, r *http.Request) {
	if os.Getenv("VLLM_SERVER_DEV_MODE") != "1" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	for _, le := range s.engines {
		le.mu.Lock()
		le.e.ResetPrefixCache()
		le.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func (s *server) writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(errorBody(e, s.nested))
}

// checkLength applies vLLM's context-length validation.
func (s *server) checkLength(prompt, maxTokens int) *apiError {
	mml := s.args.MaxModelLen
	if s.oldLenMsg {
		if prompt+max(0, maxTokens) > mml {
			return badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				mml, prompt+maxTokens, prompt, maxTokens)
		}
		return nil
	}
	if prompt > mml {
		return badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", mml, prompt)
	}
	if prompt+maxTokens > mml {
		return badRequest("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			maxTokens, mml, prompt, maxTokens, mml, prompt)
	}
	return nil
}

func (s *server) handleGenerate(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			s.writeError(w, &apiError{Status: 405, Type: "MethodNotAllowed", Message: "Method Not Allowed"})
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			s.writeError(w, badRequest("read body: %v", err))
			return
		}
		req, err := decodeRequest(body, chat)
		if err != nil {
			s.writeError(w, asAPIError(err))
			return
		}
		adapter := s.adapterIndex(req.Model)
		if req.Model != "" && req.Model != s.served && req.Model != s.o.Model && adapter == 0 {
			s.writeError(w, &apiError{Status: 404, Type: "NotFoundError", Param: "model", Message: fmt.Sprintf("The model `%s` does not exist.", req.Model)})
			return
		}
		if s.dead.Load() {
			s.writeError(w, &apiError{Status: 500, Type: "InternalServerError", Message: ErrEngineDead.Error()})
			return
		}
		if req.Priority != 0 && s.args.SchedulingPolicy != "priority" {
			s.writeError(w, badRequest("Got priority %d but Priority scheduling is not enabled.", req.Priority))
			return
		}
		if req.MaxTokens < 0 {
			req.MaxTokens = max(1, s.args.MaxModelLen-req.PromptTokens)
		}
		if e := s.checkLength(req.PromptTokens, req.MaxTokens); e != nil {
			s.writeError(w, e)
			return
		}
		if s.chance(s.o.Faults.HTTP500) {
			s.writeError(w, &apiError{Status: 500, Type: "InternalServerError", Message: "Internal Server Error (simulated by --fault-http500)"})
			return
		}
		n, reason := req.MaxTokens, "length"
		if !req.IgnoreEOS {
			if eos := max(req.MinTokens, s.eosLength()); eos < n {
				n, reason = eos, "stop"
			}
		}
		lr := &liveReq{ch: make(chan liveEvent, n+2), arrived: time.Now()}
		er := &Request{PromptLen: req.PromptTokens, OutputLen: n, Priority: req.Priority, Adapter: adapter, live: lr}
		if s.args.EnablePrefixCaching {
			er.PromptKeys = promptKeys(req, s.args.BlockSize)
		}
		le := s.engines[int(s.rr.Add(1)-1)%len(s.engines)]
		if err := le.add(er); err != nil {
			s.writeError(w, &apiError{Status: 500, Type: "InternalServerError", Message: err.Error()})
			return
		}
		if k := s.received.Add(1); s.o.Faults.RuntimeOOMAfter > 0 && k == int64(s.o.Faults.RuntimeOOMAfter) {
			go s.runtimeOOM()
		}
		id := strconv.FormatUint(s.nextID.Add(1), 16)
		g := &generation{s: s, req: req, er: er, le: le, reason: reason, created: time.Now().Unix()}
		if chat {
			g.id = "chatcmpl-sim" + id
		} else {
			g.id = "cmpl-sim" + id
		}
		if req.Stream {
			g.malformed = -1
			if s.chance(s.o.Faults.MalformedSSE) {
				g.malformed = min(1, n-1)
			}
			g.stream(w, r)
		} else {
			g.whole(w, r)
		}
	}
}

// model is the name a response reports: the LoRA adapter the request
// named, else the served model (vLLM echoes the adapter's name).
func (g *generation) model() string {
	if g.er.Adapter > 0 {
		return g.req.Model
	}
	return g.s.served
}

// runtimeOOM kills the engines with a CUDA OOM (fault injection): requests
// fail, /health turns 503, and the process exits 1 shortly after.
func (s *server) runtimeOOM() {
	s.log.engineErr(fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of %.2f GiB of which 0.31 GiB is free. (simulated by --fault-runtime-oom-after)", s.plan.TotalGiB))
	s.log.line("APIServer", "ERROR", "async_llm.py", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
	s.dead.Store(true)
	for _, le := range s.engines {
		le.kill(ErrEngineDead)
	}
	time.Sleep(time.Second)
	select {
	case s.fatal <- ErrEngineDead:
	default:
	}
}

// requestFinished counts a finished request (for --fault-crash-after).
func (s *server) requestFinished() {
	if k := s.finished.Add(1); s.o.Faults.CrashAfter > 0 && k == int64(s.o.Faults.CrashAfter) {
		s.log.engineErr("EngineCore died unexpectedly (simulated by --fault-crash-after " + strconv.Itoa(s.o.Faults.CrashAfter) + ")")
		select {
		case s.fatal <- ErrCrashed:
		default:
		}
	}
}

// generation streams or collects one request's output.
type generation struct {
	s         *server
	req       apiRequest
	er        *Request
	le        *liveEngine
	id        string
	reason    string
	created   int64
	malformed int // index of the event whose chunk is malformed; -1 none
	buf       []byte
	firstAt   time.Time // the first token's delivery
}

func (g *generation) observe(ev liveEvent, prev time.Time, first bool) {
	m := g.s.metrics
	if first {
		g.firstAt = ev.at
		m.ttft.Observe(ev.at.Sub(g.er.live.arrived).Seconds())
		return
	}
	for _, h := range m.itl {
		h.Observe(ev.at.Sub(prev).Seconds())
	}
}

func (g *generation) done(ev liveEvent, tokens int) {
	m := g.s.metrics
	lv := g.er.live
	sec := func(t time.Time) float64 { return t.Sub(lv.arrived).Seconds() }
	sched := lv.scheduled // set by the engine loop before it delivered any event
	if sched.IsZero() {
		sched = lv.arrived
	}
	m.phases.finished(0, sec(sched), sec(g.firstAt), sec(ev.at))
	m.promptLen.Observe(float64(g.req.PromptTokens))
	m.genLen.Observe(float64(tokens))
	m.success.WithLabelValues(g.reason).Inc()
	g.s.requestFinished()
}

func (g *generation) stream(w http.ResponseWriter, r *http.Request) {
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	pos, events := 0, 0
	var prev time.Time
	for {
		select {
		case ev := <-g.er.live.ch:
			if ev.err != nil {
				g.buf = append(g.buf[:0], "data: "...)
				g.buf = append(g.buf, errorBody(&apiError{Status: 500, Type: "InternalServerError", Message: ev.err.Error()}, true)...)
				g.buf = append(g.buf, "\n\ndata: [DONE]\n\n"...)
				w.Write(g.buf)
				return
			}
			g.observe(ev, prev, pos == 0)
			prev = ev.at
			g.buf = g.buf[:0]
			if g.req.Chat && pos == 0 {
				g.buf = g.chunk(g.buf, pos, 0, false, true)
			}
			g.buf = g.chunk(g.buf, pos, ev.tokens, ev.finished, false)
			if events == g.malformed {
				// a truncated JSON object: what a proxy cutting the stream produces
				cut := min(len(g.buf)-2, 40)
				g.buf = append(g.buf[:cut], "\n\n"...)
			}
			pos += ev.tokens
			events++
			if ev.finished {
				if g.req.IncludeUsage {
					g.buf = g.usageChunk(g.buf, pos)
				}
				g.buf = append(g.buf, "data: [DONE]\n\n"...)
				w.Write(g.buf)
				if fl != nil {
					fl.Flush()
				}
				g.done(ev, pos)
				return
			}
			if _, err := w.Write(g.buf); err != nil {
				g.le.abort(g.er)
				return
			}
			if fl != nil {
				fl.Flush()
			}
		case <-r.Context().Done():
			g.le.abort(g.er)
			g.s.metrics.success.WithLabelValues("abort").Inc()
			return
		}
	}
}

func (g *generation) header(b []byte) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, g.id...)
	if g.req.Chat {
		b = append(b, `","object":"chat.completion.chunk","created":`...)
	} else {
		b = append(b, `","object":"text_completion","created":`...)
	}
	b = strconv.AppendInt(b, g.created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, g.model())
	return b
}

// chunk appends one SSE event carrying tokens [pos, pos+n).
func (g *generation) chunk(b []byte, pos, n int, finished, role bool) []byte {
	b = g.header(b)
	b = append(b, `,"choices":[{"index":0,`...)
	switch {
	case role:
		b = append(b, `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`...)
		return append(b, "\n\n"...)
	case g.req.Chat:
		b = append(b, `"delta":{"content":"`...)
	default:
		b = append(b, `"text":"`...)
	}
	b = appendTokens(b, pos, n)
	if g.req.Chat {
		b = append(b, `"},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `","logprobs":null,"finish_reason":`...)
	}
	if finished {
		b = append(b, '"')
		b = append(b, g.reason...)
		b = append(b, `","stop_reason":null}]`...)
	} else if g.req.Chat {
		b = append(b, `null}]`...)
	} else {
		b = append(b, `null,"stop_reason":null}]`...)
	}
	if !g.req.Chat {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

func (g *generation) usageChunk(b []byte, tokens int) []byte {
	b = g.header(b)
	b = append(b, `,"choices":[],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(g.req.PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(g.req.PromptTokens+tokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, "}}\n\n"...)
}

func (g *generation) whole(w http.ResponseWriter, r *http.Request) {
	pos := 0
	var prev time.Time
	for {
		select {
		case ev := <-g.er.live.ch:
			if ev.err != nil {
				g.s.writeError(w, &apiError{Status: 500, Type: "InternalServerError", Message: ev.err.Error()})
				return
			}
			g.observe(ev, prev, pos == 0)
			prev = ev.at
			pos += ev.tokens
			if !ev.finished {
				continue
			}
			text := string(appendTokens(nil, 0, pos))
			usage := map[string]any{"prompt_tokens": g.req.PromptTokens, "total_tokens": g.req.PromptTokens + pos,
				"completion_tokens": pos, "prompt_tokens_details": nil}
			var choice map[string]any
			object := "text_completion"
			if g.req.Chat {
				object = "chat.completion"
				choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text, "tool_calls": []any{}},
					"logprobs": nil, "finish_reason": g.reason, "stop_reason": nil}
			} else {
				choice = map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": g.reason,
					"stop_reason": nil, "prompt_logprobs": nil}
			}
			writeJSON(w, 200, map[string]any{"id": g.id, "object": object, "created": g.created, "model": g.model(),
				"choices": []any{choice}, "usage": usage})
			g.done(ev, pos)
			return
		case <-r.Context().Done():
			g.le.abort(g.er)
			g.s.metrics.success.WithLabelValues("abort").Inc()
			return
		}
	}
}

// logStats prints vLLM's periodic "Engine 000: Avg prompt throughput" line
// every 10 s while there is activity.
func (s *server) logStats(ctx context.Context) {
	const every = 10 * time.Second
	t := time.NewTicker(every)
	defer t.Stop()
	prev := make([]Stats, len(s.engines))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, le := range s.engines {
			snap := le.snapshot()
			dp := snap.stats.PromptTokens - prev[i].PromptTokens
			dg := snap.stats.GenTokens - prev[i].GenTokens
			dq := snap.stats.PrefixQueries - prev[i].PrefixQueries
			dh := snap.stats.PrefixHits - prev[i].PrefixHits
			prev[i] = snap.stats
			if dp == 0 && dg == 0 && snap.running == 0 && snap.waiting == 0 {
				continue
			}
			hit := 0.0
			if dq > 0 {
				hit = 100 * float64(dh) / float64(dq)
			}
			s.log.line("APIServer", "INFO", "loggers.py", fmt.Sprintf(
				"Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
				i, float64(dp)/every.Seconds(), float64(dg)/every.Seconds(), snap.running, snap.waiting, 100*snap.kvUsage, hit))
		}
	}
}
