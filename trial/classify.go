package trial

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// EngineError is a classified engine failure. Kind is one of the sentinel
// errors of this package (ErrOOM, ErrKVTooSmall, ...) so callers use
// errors.Is; Line is the log line that decided the class and Tail the end of
// the log, to explain the failure to a person.
type EngineError struct {
	Kind     error
	ExitCode int    // -1: killed by a signal or still running
	Signal   string // the signal that killed the engine, e.g. "signal 9 (killed)"
	Line     string
	Tail     []string
}

// ErrEnvironment: the engine failed for a reason outside the config (a
// full disk, a broken install): the search must stop, not learn from it.
var ErrEnvironment = errors.New("engine environment broken")

// ErrDistributedPort is matched by every *DistPortError.
var ErrDistributedPort = errors.New("distributed (torch) port already in use")

// DistPortError: torch.distributed could not bind its rendezvous port
// (MASTER_PORT, 29500 unless set) because another process holds it. The
// machine, not the config: an environment failure (the trial is
// interrupted, the search learns nothing from it), and not the engine's API
// port (ErrPortInUse), which a retry on a fresh port mends.
type DistPortError struct {
	Port int // 0 when the log names none
}

func (e *DistPortError) Error() string {
	port := "port"
	if e.Port > 0 {
		port = "port " + strconv.Itoa(e.Port)
	}
	return "distributed (torch) " + port + " already in use by another process; free it or set MASTER_PORT (VLLM_PORT) to a free one"
}

// Is makes errors.Is hold for ErrDistributedPort and ErrEnvironment.
func (e *DistPortError) Is(target error) bool {
	return target == ErrDistributedPort || target == ErrEnvironment
}

// DistPortInUse finds a torch.distributed address-in-use line in log and
// the port it names (0 when none).
func DistPortInUse(log []byte) (port int, line string, ok bool) {
	for ln := range bytes.Lines(log) {
		if !reAddrInUse.Match(ln) || !reTorchDist.Match(ln) {
			continue
		}
		if ports := namedPorts(ln); len(ports) > 0 {
			port = ports[0]
		}
		return port, clip(Redact(strings.TrimSpace(string(ln)))), true
	}
	return 0, "", false
}

func (e *EngineError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.ExitCode >= 0 {
		fmt.Fprintf(&b, " (exit %d)", e.ExitCode)
	} else if e.Signal != "" {
		fmt.Fprintf(&b, " (killed by %s)", e.Signal)
	}
	if e.Line != "" {
		fmt.Fprintf(&b, ": %s", e.Line)
	}
	return b.String()
}

func (e *EngineError) Unwrap() error { return e.Kind }

// The classification regexes of reference §2.6. Order matters: the KV
// check is more specific than the generic memory one, and both beat the
// argument checks (an engine that got far enough to run out of memory
// accepted its arguments).
var (
	// Startup messages, then the per-request ones of an engine whose KV
	// cache cannot hold a request (each request fails with HTTP 500).
	reKVTooSmall = regexp.MustCompile(`larger than the available KV cache memory|is larger than the maximum number of tokens that can be stored in KV cache|exceeds (?:the )?capacity of (?:the )?block_manager|(?i:KV cache (?:is )?too small|(?:insufficient|not enough) (?:free )?KV cache)`)
	reOOM        = regexp.MustCompile(`CUDA out of memory|OutOfMemoryError|No available memory for the cache blocks|` + reFreeShort.String())
	// The one OOM that more utilisation cannot cure: the GPU had less free
	// memory than the utilisation asks for (another process holds some).
	reFreeShort = regexp.MustCompile(`Free memory on device .* is less than desired`)
	// Config rejections at startup (before any GPU work): vLLM's validation
	// messages, argparse errors, and features the engine refuses for this
	// combination ("Async scheduling is not supported with pipeline-parallel-size > 1",
	// "Concurrent Partial Prefill is not supported by the V1 engine").
	reInvalid = regexp.MustCompile(`must be divisible by tensor parallel size|must be greater than or equal to max_num_seqs|is smaller than max_model_len|unrecognized arguments|invalid choice|error: argument --|: error: |is not supported with|is not supported by the V1 engine|NotImplementedError: |flag provided but not defined|unknown flag|unknown (?:option|argument)|unrecognized option`)
	// A usage text: a server that prints it and exits did not take its
	// arguments, whatever its exit code (some exit 0 on an unknown flag).
	reUsage = regexp.MustCompile(`(?m)^\s*(?:[Uu]sage:|Usage of )`)
	// The machine, not the config: a full disk or quota (also the log's
	// disk: Python exits 120 when it cannot flush stdout at exit).
	reEnvironment = regexp.MustCompile(`No space left on device|\[Errno 28\]|\bENOSPC\b|Disk quota exceeded|\[Errno 122\]`)

	reVersion    = regexp.MustCompile(`vLLM API server version (\S+)`)
	reAvailKV    = regexp.MustCompile(`Available KV cache memory: (-?[\d.]+) GiB`)
	reKVTokens   = regexp.MustCompile(`GPU KV cache size: ([\d,]+) tokens`)
	reMaxConc    = regexp.MustCompile(`Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x`)
	reWeights    = regexp.MustCompile(`Model loading took ([\d.]+) ?GiB`)
	reGraph      = regexp.MustCompile(`Graph capturing finished in \d+ secs, took ([\d.]+) GiB`)
	reInitEngine = regexp.MustCompile(`init engine .* took ([\d.]+) seconds`)
	// key=value or "key": "value"; the key decides (SecretName).
	reKeyValue = regexp.MustCompile(`([A-Za-z][\w.-]*)(["']?\s*[=:]\s*["']?)([^\s"',}]+)`)
)

// tailLines is how many log lines an EngineError keeps.
const tailLines = 20

// Classify turns an engine's exit (code -1 when it was killed or is still
// running) and its whole log into an *EngineError. duringLoad says the
// engine had been healthy: an unexplained exit is then ErrCrashed, while
// before health it is ErrCrashed too unless the log or exit 2 says more.
func Classify(log []byte, exitCode int, duringLoad bool) *EngineError {
	e := &EngineError{Kind: ErrCrashed, ExitCode: exitCode, Tail: Tail(log, tailLines)}
	switch {
	case matchLine(log, reKVTooSmall, &e.Line):
		e.Kind = ErrKVTooSmall
	case matchLine(log, reOOM, &e.Line):
		e.Kind = ErrOOM
	case matchLine(log, reEnvironment, &e.Line):
		e.Kind = ErrEnvironment
	case distPort(log, e):
	case exitCode == 2 && !duringLoad:
		e.Kind = ErrInvalidArgument
		matchLine(log, reInvalid, &e.Line)
	case matchLine(log, reInvalid, &e.Line) && !duringLoad:
		e.Kind = ErrInvalidArgument
	case exitCode == 0 && !duringLoad && matchLine(log, reUsage, &e.Line):
		e.Kind = ErrInvalidArgument
	case exitCode == 120:
		e.Kind = ErrEnvironment
		e.Line = "exit 120: the engine could not write its output (a full disk?)"
	default:
		// An invalid-argument line seen during load stays the fallback.
		if rc := rootCause(log); rc != "" {
			e.Line = rc
		}
		if e.Line == "" && len(e.Tail) > 0 {
			e.Line = e.Tail[len(e.Tail)-1]
		}
	}
	if e.Line == "" {
		e.Line = rootCause(log)
	}
	return e
}

// distPort classifies a torch.distributed port conflict.
func distPort(log []byte, e *EngineError) bool {
	port, line, ok := DistPortInUse(log)
	if ok {
		e.Kind, e.Line = &DistPortError{Port: port}, line
	}
	return ok
}

var (
	reTraceback = regexp.MustCompile(`Traceback \(most recent call last\)`)
	reWrapper   = regexp.MustCompile(`EngineDeadError|Engine core initialization failed`)
	reException = regexp.MustCompile(`\b[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b:`)
	reErrLevel  = regexp.MustCompile(`\b(?:ERROR|CRITICAL)\b`)
)

// rootCause returns the most specific failure line of log (trimmed, secrets
// masked), or "" when none looks like one. vLLM V1 re-raises every engine
// core failure as a generic RuntimeError ("Engine core initialization
// failed. See root cause above.") or EngineDeadError below the client
// traceback (reference §2.6); the cause is the exception or ERROR line
// above it. Lines rank: an ERROR-level exception line (ValueError: ...),
// then any exception line, then an ERROR-level line, then the generic
// wrapper, then a bare "Traceback"; the first line of the best rank wins
// (the original exception precedes those raised while handling it).
func rootCause(log []byte) string {
	best, rank := "", 0
	for len(log) > 0 {
		var ln []byte
		if i := bytes.IndexByte(log, '\n'); i >= 0 {
			ln, log = log[:i], log[i+1:]
		} else {
			ln, log = log, nil
		}
		r := 0
		switch {
		case reWrapper.Match(ln):
			r = 2
		case reTraceback.Match(ln):
			r = 1
		case reException.Match(ln):
			r = 4
			if reErrLevel.Match(ln) {
				r = 5
			}
		case reErrLevel.Match(ln):
			r = 3
		}
		if r > rank {
			best, rank = string(ln), r
		}
	}
	return clip(Redact(strings.TrimSpace(best)))
}

// clip bounds a shown log line.
func clip(s string) string { return clipN(s, 400) }

// clipN cuts s to n bytes (on a rune boundary) and marks the cut.
func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// tailLineMax bounds each line of a failure's tail: a flooding engine's
// junk must not make a stored error string of many kilobytes.
const tailLineMax = 200

// matchLine finds the first line of log matching re and stores it (trimmed,
// secrets masked) in *line.
func matchLine(log []byte, re *regexp.Regexp, line *string) bool {
	loc := re.FindIndex(log)
	if loc == nil {
		return false
	}
	s := bytes.LastIndexByte(log[:loc[0]], '\n') + 1
	e := bytes.IndexByte(log[loc[1]:], '\n')
	if e < 0 {
		e = len(log)
	} else {
		e += loc[1]
	}
	*line = clip(Redact(strings.TrimSpace(string(log[s:e]))))
	return true
}

// Tail returns the last n non-empty lines of log, secrets masked.
func Tail(log []byte, n int) []string {
	var out []string
	for len(log) > 0 && len(out) < n {
		log = bytes.TrimRight(log, "\r\n")
		i := bytes.LastIndexByte(log, '\n')
		line := strings.TrimSpace(string(log[i+1:]))
		log = log[:max(i, 0)]
		if line != "" {
			out = append(out, clipN(Redact(line), tailLineMax))
		}
		if i < 0 {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Redact masks, in a log line, Hugging Face tokens, bearer tokens and the
// values of secret-named keys (key=value, "key": "value"; SecretName
// decides, so "time-to-first-token" and "max_num_batched_tokens" stay). A
// number is never taken for a secret value.
func Redact(s string) string {
	s = reKeyValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := reKeyValue.FindStringSubmatch(m)
		if !SecretName(sub[1]) || isNumber(sub[3]) {
			return m
		}
		return sub[1] + sub[2] + masked
	})
	s = reBearer.ReplaceAllString(s, "${1}${2}"+masked)
	return reHFToken.ReplaceAllString(s, "hf_"+masked)
}

// LogFacts are the numbers a vLLM startup log reveals.
type LogFacts struct {
	Version        string  `json:"version,omitempty"`
	AvailableKVGiB float64 `json:"available_kv_gib,omitempty"`
	KVCacheTokens  int     `json:"kv_cache_tokens,omitempty"`
	MaxConcurrency float64 `json:"max_concurrency,omitempty"`
	WeightsGiB     float64 `json:"weights_gib,omitempty"`
	GraphGiB       float64 `json:"graph_gib,omitempty"`
	InitEngineS    float64 `json:"init_engine_s,omitempty"`
}

// ParseLogFacts reads the last occurrence of each known startup line.
func ParseLogFacts(log []byte) LogFacts {
	var f LogFacts
	if m := lastSubmatch(log, reVersion); m != "" {
		f.Version = strings.TrimRight(m, ".,;")
	}
	f.AvailableKVGiB = lastFloat(log, reAvailKV)
	f.KVCacheTokens = int(lastFloat(log, reKVTokens))
	f.MaxConcurrency = lastFloat(log, reMaxConc)
	f.WeightsGiB = lastFloat(log, reWeights)
	f.GraphGiB = lastFloat(log, reGraph)
	f.InitEngineS = lastFloat(log, reInitEngine)
	return f
}

func lastSubmatch(log []byte, re *regexp.Regexp) string {
	all := re.FindAllSubmatch(log, -1)
	if len(all) == 0 {
		return ""
	}
	return string(all[len(all)-1][1])
}

func lastFloat(log []byte, re *regexp.Regexp) float64 {
	s := strings.ReplaceAll(lastSubmatch(log, re), ",", "")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}
