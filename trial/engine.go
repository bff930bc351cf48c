package trial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
)

// EngineConfig says how to start one engine process.
type EngineConfig struct {
	// Command is the program and its leading arguments, e.g.
	// {"vllm", "serve", MODEL} or {"/path/vllm-sim", "serve", MODEL, "--gpu", "H100-80GB"}.
	Command []string
	// Flags are the candidate's engine flags (spaces.Config.Flags()).
	Flags []string
	Host  string // default 127.0.0.1
	Port  int    // 0: a free port is chosen
	// LogPath receives the engine's stdout and stderr (required).
	LogPath string
	// Env is added to the allowlisted part of the tuner's environment ("K=V").
	Env []string
	// StopGrace is how long SIGTERM may take before SIGKILL (default 10 s).
	StopGrace time.Duration
	// MaxLogBytes caps the log file; past it the file rotates to
	// LogPath.1 (default DefaultMaxLogBytes).
	MaxLogBytes int64
	Logger      *slog.Logger
}

// Engine is a running engine process in its own process group. It is a live
// handle: never persisted. Stop it exactly once (Stop is idempotent).
type Engine struct {
	cfg     EngineConfig
	proc    *engineProc
	pgid    int
	base    string
	log     *engineLog
	pipe    *os.File      // read end of the engine's stdout and stderr
	copied  chan struct{} // closed when the pipe reached EOF
	rec     EngineRecord
	cancel  context.CancelFunc
	done    chan struct{}
	healthy bool
	started time.Time
	stop    sync.Once
	stopErr error
	members []int // processes of the group seen last (for the GPU hygiene check)
	logFrom int64 // size of the log file when this engine started (its output follows)
	mu      sync.Mutex
	hc      *http.Client
}

// envAllow lists the variables passed to the engine; prefixes end in "_".
var envAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONPATH",
	"VIRTUAL_ENV", "CONDA_PREFIX", "HF_TOKEN", "HF_HOME",
	"HF_", "HUGGING_FACE_", "TRANSFORMERS_", "CUDA_", "NVIDIA_", "VLLM_", "NCCL_", "TORCH_",
	"PYTORCH_", "TRITON_", "XDG_", "LC_", "OMP_", "MKL_", "HIP_", "ROCR_", "ROCM_",
}

// EngineEnv filters environ to the allowlist and appends extra.
func EngineEnv(environ, extra []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && allowed(k) {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

func allowed(k string) bool {
	for _, a := range envAllow {
		if k == a || strings.HasSuffix(a, "_") && strings.HasPrefix(k, a) {
			return true
		}
	}
	return false
}

// secretWords are the name words that mark a secret flag or variable.
var secretWords = []string{"TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"}

// engineParams are the normalised names (lower case, "_" for "-") of the
// engine parameters of the default space: tuning knobs, never secrets,
// even when a word of theirs is (long_prefill_token_threshold).
var engineParams = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	s, err := spaces.Default()
	if err != nil {
		return m // the embedded space is tested; fail closed (redact more)
	}
	for _, p := range s.Params {
		m[normName(p.Name)] = true
	}
	return m
})

// normName lower-cases a flag or variable name, drops leading dashes and
// writes "-" as "_".
func normName(k string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimLeft(k, "-")), "-", "_")
}

// textTokenWords before TOKEN make it a unit of text, not a credential:
// time-to-first-token, inter_token_latency, bos_token, max_token.
var textTokenWords = []string{"FIRST", "LAST", "NEXT", "INTER", "PER", "MAX", "MIN", "NUM", "TOTAL", "INPUT", "OUTPUT",
	"PROMPT", "GENERATED", "NEW", "SPECIAL", "BOS", "EOS", "PAD", "UNK", "SEP", "CLS", "MASK", "STOP", "DECODE"}

// SecretName reports whether an environment variable, flag or log key
// holds a secret: one of its dash/underscore/dot-separated words is a
// secret word (HF_TOKEN, --api-key) and it is not an engine parameter of
// the space (--long-prefill-token-threshold). TOKEN after a word of
// textTokenWords counts text (time-to-first-token, bos_token);
// --max-num-batched-tokens has no secret word ("TOKENS").
func SecretName(k string) bool {
	words := strings.FieldsFunc(strings.ToUpper(k), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	secret := false
	for i, w := range words {
		if !slices.Contains(secretWords, w) {
			continue
		}
		if w == "TOKEN" && i > 0 && slices.Contains(textTokenWords, words[i-1]) {
			continue
		}
		secret = true
	}
	return secret && !engineParams()[normName(k)]
}

// RedactArgs masks the values of secret flags (e.g. --api-key X, --hf-token=X)
// for logs and printed command lines.
func RedactArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		name, _, hasEq := strings.Cut(out[i], "=")
		if !strings.HasPrefix(name, "--") || !SecretName(name) {
			continue
		}
		if hasEq {
			out[i] = name + "=***"
		} else if i+1 < len(out) {
			out[i+1] = "***"
			i++
		}
	}
	return out
}

// FreePort asks the kernel for a free TCP port on host.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PortFree reports whether host:port can be listened on now.
func PortFree(host string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// WaitPortFree polls until host:port is free or ctx ends.
func WaitPortFree(ctx context.Context, host string, port int) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !PortFree(host, port) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("port %d still in use: %w", port, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// engineProc is the engine's leader as StartEngine started it: on Linux
// under a guard that ends every process of the engine when the tuner dies
// (guard_linux.go), elsewhere directly.
type engineProc struct {
	pid  int           // the engine's leader, its process group id too
	done chan struct{} // closed once the leader exited (ws holds its status)
	ws   syscall.WaitStatus
	wsOK bool // false: the status is unknown
	// release ends what is left below the engine once Stop saw its group
	// gone (the guard and the processes that escaped the group).
	release func() error
}

// StartEngine starts the engine process; it returns once the process runs
// (use WaitHealthy for readiness). The process gets its own process group;
// every process of the engine is killed within moments when the tuner dies,
// even by SIGKILL (on Linux, see guard_linux.go); the whole group is sent
// SIGTERM when ctx is cancelled, SIGKILL after StopGrace.
func StartEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(cfg.Command) == 0 {
		return nil, errors.New("start engine: empty command")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Port == 0 {
		p, err := FreePort(cfg.Host)
		if err != nil {
			return nil, err
		}
		cfg.Port = p
	}
	args := append(slices.Clone(cfg.Command[1:]), cfg.Flags...)
	args = append(args, "--host", cfg.Host, "--port", strconv.Itoa(cfg.Port))
	env := EngineEnv(os.Environ(), cfg.Env)
	// The engine's output passes through the tuner: secret values are
	// masked before anything reaches the disk, and the file is capped.
	logf, err := openEngineLog(cfg.LogPath, cfg.MaxLogBytes, newRedactor(engineSecrets(env, args)))
	if err != nil {
		return nil, fmt.Errorf("start engine: log: %w", err)
	}
	logFrom := logf.size
	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	// Every process of the engine inherits the marker: the stale-engine
	// reaper kills only processes that carry it (stale.go).
	marker := newMarker()
	env = append(env, engineMarkerEnv+"="+marker)
	shown := strings.Join(RedactArgs(append([]string{cfg.Command[0]}, args...)), " ")
	logf.header(fmt.Sprintf("# tuner: %s\n# tuner: command: %s\n# tuner: env keys: %s\n",
		time.Now().UTC().Format(time.RFC3339), shown, strings.Join(keys, " ")))
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.close()
		return nil, fmt.Errorf("start engine: pipe: %w", err)
	}

	ectx, cancel := context.WithCancel(ctx)
	path, err := exec.LookPath(cfg.Command[0])
	var proc *engineProc
	if err == nil {
		proc, err = startEngineProc(ectx, path, args, env, pw)
	}
	pw.Close() // the engine holds the write end now
	if err != nil {
		cancel()
		pr.Close()
		logf.close()
		return nil, fmt.Errorf("start engine %s: %w", cfg.Command[0], err)
	}
	pid := proc.pid
	e := &Engine{
		cfg: cfg, proc: proc, pgid: pid, log: logf, pipe: pr, copied: make(chan struct{}), cancel: cancel, logFrom: logFrom,
		done: make(chan struct{}), started: time.Now(),
		base: "http://" + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		hc:   &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}},
		rec: EngineRecord{
			PGID: pid, Start: procStartTime(pid), Marker: marker, Exe: procExe(pid), Log: cfg.LogPath,
			Owner: os.Getpid(), OwnerStart: procStartTime(os.Getpid()), Host: hostname(), Boot: bootID(),
		},
	}
	cfg.Logger.Info("engine started", "pid", e.pgid, "port", cfg.Port, "log", cfg.LogPath)
	go func() {
		logf.copyFrom(pr)
		close(e.copied)
	}()
	go func() {
		<-proc.done
		// What the engine wrote before it exited is in the file before
		// anyone hears of the exit (Failure reads the log).
		logf.sync(e.copied, func() int { return pipePending(pr) }, time.Second)
		close(e.done)
	}()
	return e, nil
}

// Record describes the engine for the stale-engine reaper.
func (e *Engine) Record() EngineRecord { return e.rec }

// BaseURL is the engine's HTTP root, e.g. http://127.0.0.1:8123.
func (e *Engine) BaseURL() string { return e.base }

// Port is the engine's TCP port.
func (e *Engine) Port() int { return e.cfg.Port }

// PID is the process id of the engine (its process group id too).
func (e *Engine) PID() int { return e.pgid }

// LogPath is the per-trial log file.
func (e *Engine) LogPath() string { return e.cfg.LogPath }

// Exited is closed when the engine process has exited.
func (e *Engine) Exited() <-chan struct{} { return e.done }

// ExitCode is the process's exit status, -1 while running or when killed by
// a signal.
func (e *Engine) ExitCode() int {
	select {
	case <-e.done:
		if e.proc.wsOK && e.proc.ws.Exited() {
			return e.proc.ws.ExitStatus()
		}
	default:
	}
	return -1
}

// readLogMax bounds what ReadLog returns (and so the memory that
// classifying a flooding engine's log takes).
const readLogMax = 8 << 20

// ReadLog returns this engine's log so far: at most the last 8 MiB, earlier
// engines' output in the same file left out, and the rotated part included
// when the log passed its cap.
func (e *Engine) ReadLog() []byte {
	if rotated, _ := e.log.state(); rotated {
		cur, _ := readTail(e.cfg.LogPath, 0, readLogMax)
		prev, _ := readTail(e.cfg.LogPath+".1", 0, readLogMax-int64(len(cur)))
		return append(prev, cur...)
	}
	b, err := readTail(e.cfg.LogPath, e.logFrom, readLogMax)
	if err != nil {
		return nil
	}
	return b
}

// LogError is the first error writing the engine's log (a full disk), nil
// when none.
func (e *Engine) LogError() error {
	_, err := e.log.state()
	return err
}

// LostPort reports whether the engine failed because its API port was
// taken (another process bound it between the tuner's choice and the
// engine's bind): not the config's fault. See PortLost.
func (e *Engine) LostPort() bool { return PortLost(e.ReadLog(), e.cfg.Port) }

var (
	// An address-in-use line in the wording of Python (OSError, uvicorn),
	// Go (bind: address already in use), torch (EADDRINUSE) or ZMQ.
	reAddrInUse = regexp.MustCompile(`(?i)address already in use|\[Errno 98\]|\bEADDRINUSE\b|errno: 98\b`)
	// torch.distributed's own wording (c10d, its TCPStore rendezvous).
	reTorchDist = regexp.MustCompile(`(?i)torch\.distributed|DistNetworkError|DistStoreError|\bc10d\b|TCPStore|MASTER_PORT|init_process_group`)
	// Ports named in such a line: host:port, [v6]:port, ('host', port),
	// "port 29500", "port: 29500", tcp://host:port.
	rePortNamed = regexp.MustCompile(`(?i)(?:\b(?:\d{1,3}\.){3}\d{1,3}|\blocalhost|\]|\*|\btcp://[^\s:/]+):(\d{1,5})\b|'[^']*',\s*(\d{1,5})\)|\bport\b["']?\s*[:=]?\s*(\d{1,5})\b`)
)

// PortLost reports whether log says the engine could not bind port: a line
// about an address in use that names that port, or names no port at all
// (Python's bare "OSError: [Errno 98] Address already in use" from the API
// server's bind). A line about another port (torch.distributed's 29500, a
// ZMQ socket) is another failure.
func PortLost(log []byte, port int) bool {
	for ln := range bytes.Lines(log) {
		if !reAddrInUse.Match(ln) || reTorchDist.Match(ln) {
			continue // torch.distributed's port is not the API port (DistPortError)
		}
		named := namedPorts(ln)
		if len(named) == 0 || slices.Contains(named, port) {
			return true
		}
	}
	return false
}

// namedPorts are the ports an address-in-use line names.
func namedPorts(ln []byte) []int {
	var out []int
	for _, m := range rePortNamed.FindAllSubmatch(ln, -1) {
		for _, g := range m[1:] {
			if n, err := strconv.Atoi(string(g)); err == nil && n > 0 && n < 65536 {
				out = append(out, n)
			}
		}
	}
	return out
}

// ErrPortInUse: the engine could not bind its port.
var ErrPortInUse = errors.New("engine port already in use")

func readTail(path string, from, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil // a device (/dev/null, /dev/full) holds no log
	}
	off := max(from, st.Size()-n, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	// The engine may still be writing: read no more than n.
	return io.ReadAll(io.LimitReader(f, max(n, 0)))
}

// Failure classifies the engine's state from its exit status and log;
// duringLoad says it had been healthy. A log the tuner could not write (a
// full disk) makes it an environment failure: the cause may be missing.
func (e *Engine) Failure(duringLoad bool) *EngineError {
	f := Classify(e.ReadLog(), e.ExitCode(), duringLoad)
	f.Signal = e.signal()
	if err := e.LogError(); err != nil && !errors.Is(f, ErrOOM) && !errors.Is(f, ErrKVTooSmall) {
		f.Kind, f.Line = ErrEnvironment, clip("engine log: "+err.Error())
	}
	return f
}

// signal names the signal that ended the engine ("" when it exited or
// runs).
func (e *Engine) signal() string {
	select {
	case <-e.done:
	default:
		return ""
	}
	if ws := e.proc.ws; e.proc.wsOK && ws.Signaled() {
		return fmt.Sprintf("signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return ""
}

// WaitHealthy polls /health until it answers 200. It fails with a
// classified *EngineError when the process exits first, ErrStartupTimeout
// when timeout passes (ErrUnhealthy if /health kept answering non-200), or
// ctx's error.
func (e *Engine) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	// Probes end with the wait and with the process: whatever holds the
	// port after the engine died (another listener that accepts and never
	// answers) must not hide the exit behind probe timeouts.
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-e.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastStatus := 0
	for {
		// An exit outranks a deadline or a tick that is ready at the same
		// moment (select would pick among them at random).
		select {
		case <-e.done:
			return e.Failure(false)
		default:
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if wctx.Err() != nil {
			kind := ErrStartupTimeout
			if lastStatus != 0 {
				kind = ErrUnhealthy
			}
			f := e.Failure(false)
			f.Kind = kind
			f.Line = fmt.Sprintf("no /health 200 within %v (last status %d)", timeout, lastStatus)
			return f
		}
		select {
		case <-e.done:
			continue
		case <-wctx.Done():
			continue
		case <-tick.C:
		}
		st, err := e.health(wctx)
		if err == nil && st == http.StatusOK {
			e.mu.Lock()
			e.healthy = true
			e.mu.Unlock()
			return nil
		}
		if err == nil {
			lastStatus = st
		}
	}
}

// Healthy probes /health once.
func (e *Engine) Healthy(ctx context.Context) bool {
	st, err := e.health(ctx)
	return err == nil && st == http.StatusOK
}

func (e *Engine) health(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// getJSON fetches base+path and decodes it into v.
func getJSON(ctx context.Context, hc *http.Client, base, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// ServerVersion is the version /version of the OpenAI-compatible server
// at base reports (vLLM's).
func ServerVersion(ctx context.Context, hc *http.Client, base string) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := getJSON(ctx, hc, base, "/version", &v); err != nil {
		return "", err
	}
	return v.Version, nil
}

// ServedModels are the ids /v1/models of the OpenAI-compatible server at
// base lists (what requests must name).
func ServedModels(ctx context.Context, hc *http.Client, base string) ([]string, error) {
	var m struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, hc, base, "/v1/models", &m); err != nil {
		return nil, err
	}
	ids := make([]string, len(m.Data))
	for i, d := range m.Data {
		ids[i] = d.ID
	}
	return ids, nil
}

// Version is the engine's vLLM version: from /version, else from the
// "vLLM API server version X" log line, else "".
func (e *Engine) Version(ctx context.Context) string {
	if v, err := ServerVersion(ctx, e.hc, e.base); err == nil && v != "" {
		return v
	}
	return ParseLogFacts(e.ReadLog()).Version
}

// ServedModel is the first model /v1/models lists (what requests must
// name).
func (e *Engine) ServedModel(ctx context.Context) (string, error) {
	ids, err := ServedModels(ctx, e.hc, e.base)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", errors.New("GET /v1/models: no model served")
	}
	return ids[0], nil
}

// Members lists the live (non-zombie) processes of the engine's group.
func (e *Engine) Members() []int {
	m := GroupMembers(e.pgid)
	if len(m) > 0 {
		e.mu.Lock()
		e.members = m
		e.mu.Unlock()
	}
	return m
}

// Seen returns every process of the group observed while it ran (for the
// GPU-memory hygiene check after the engine stops).
func (e *Engine) Seen() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.members)
}

// Stop ends the engine: SIGTERM to the process group, StopGrace to exit,
// then SIGKILL to the group; it waits for the process, for every member of
// the group to be gone and for the port to be free (each bounded). It is
// idempotent and safe to call after the engine exited by itself.
func (e *Engine) Stop() error {
	e.stop.Do(func() {
		e.Members()
		t0 := time.Now()
		e.cancel() // SIGTERM to the group (through the guard on Linux)
		grace := time.NewTimer(e.cfg.StopGrace)
		select {
		case <-e.done:
		case <-grace.C:
		}
		grace.Stop()
		if len(GroupMembers(e.pgid)) > 0 {
			if err := syscall.Kill(-e.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				e.stopErr = fmt.Errorf("stop engine: kill group %d: %w", e.pgid, err)
			}
		}
		select {
		case <-e.done:
		case <-time.After(e.cfg.StopGrace + 5*time.Second):
			e.stopErr = errors.Join(e.stopErr, fmt.Errorf("stop engine: pid %d did not exit", e.pgid))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for len(GroupMembers(e.pgid)) > 0 {
			if ctx.Err() != nil {
				e.stopErr = errors.Join(e.stopErr, fmt.Errorf("stop engine: group %d still has processes %v", e.pgid, GroupMembers(e.pgid)))
				break
			}
			syscall.Kill(-e.pgid, syscall.SIGKILL)
			time.Sleep(20 * time.Millisecond)
		}
		// The processes that left the group go with the guard.
		if err := e.proc.release(); err != nil {
			e.stopErr = errors.Join(e.stopErr, err)
		}
		if err := WaitPortFree(ctx, e.cfg.Host, e.cfg.Port); err != nil {
			e.stopErr = errors.Join(e.stopErr, err)
		}
		// The group is gone, so the pipe is at EOF unless a process that
		// left the group holds it: stop reading then.
		select {
		case <-e.copied:
		case <-time.After(time.Second):
			e.pipe.Close()
			<-e.copied
		}
		e.pipe.Close()
		e.log.close()
		e.hc.CloseIdleConnections()
		e.cfg.Logger.Info("engine stopped", "pid", e.pgid, "exit", e.ExitCode(), "took", time.Since(t0).Round(time.Millisecond))
	})
	return e.stopErr
}
