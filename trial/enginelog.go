package trial

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxLogBytes caps one engine log file; past it the file is rotated
// to PATH.1, so a trial keeps the last 2x this much of the engine's output.
const DefaultMaxLogBytes = 16 << 20

// maxLine is the longest partial line held before it is written out.
const maxLine = 64 << 10

// redactor masks, in engine output, the values of the secrets the tuner
// passed to the engine, bearer tokens and Hugging Face tokens.
type redactor struct {
	secrets [][]byte // longest first
	keep    int      // bytes held back at a forced cut (a secret may straddle it)
}

var (
	reBearer  = regexp.MustCompile(`(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]{8,}`)
	reHFToken = regexp.MustCompile(`\bhf_[A-Za-z0-9]{16,}`)
)

const masked = "***"

func newRedactor(secrets []string) *redactor {
	r := &redactor{keep: 256}
	seen := map[string]bool{}
	for _, s := range secrets {
		if !seen[s] && secretValue(s) {
			seen[s] = true
			r.secrets = append(r.secrets, []byte(s))
			r.keep = max(r.keep, len(s))
		}
	}
	slices.SortFunc(r.secrets, func(a, b []byte) int { return len(b) - len(a) })
	return r
}

// secretValue reports whether v can be masked wherever it appears: long
// enough not to hit ordinary text, and not a number (HF_HUB_DISABLE_TOKEN=1
// has a secret-looking name and a value that is everywhere).
func secretValue(v string) bool {
	return len(v) >= 6 && !isNumber(v)
}

var reNumber = regexp.MustCompile(`^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[a-zA-Zµ%]{0,3})$`)

// isNumber: a plain number, optionally with a short unit (0.25, 12ms, 1e3).
func isNumber(s string) bool { return reNumber.MatchString(s) }

// mask redacts b (one line or a chunk of one).
func (r *redactor) mask(b []byte) []byte {
	for _, s := range r.secrets {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, []byte(masked))
		}
	}
	// Cheap tests first: most lines hold neither pattern.
	if bytes.Contains(b, []byte("earer")) || bytes.Contains(b, []byte("EARER")) {
		b = reBearer.ReplaceAll(b, []byte("${1}${2}"+masked))
	}
	if bytes.Contains(b, []byte("hf_")) {
		b = reHFToken.ReplaceAll(b, []byte("hf_"+masked))
	}
	return b
}

// cut is where a line longer than maxLine may be split: at most keep
// bytes before its end, and never inside an occurrence of a secret.
func (r *redactor) cut(b []byte) int {
	c := len(b) - r.keep
	for _, s := range r.secrets {
		lo := max(0, c-len(s)+1)
		if i := bytes.Index(b[lo:min(len(b), c+len(s)-1)], s); i >= 0 && lo+i < c {
			c = lo + i
		}
	}
	return max(c, 0)
}

// engineLog receives an engine's stdout and stderr through a pipe: it masks
// secrets line by line and writes the file, rotating it to PATH.1 when it
// passes max bytes (the newest output is kept; disk use stays under 2x max).
type engineLog struct {
	path string
	max  int64
	red  *redactor

	mu      sync.Mutex
	f       *os.File
	size    int64
	rotated bool
	line    []byte // partial line
	busy    bool   // a read chunk is being processed
	err     error
}

func openEngineLog(path string, maxBytes int64, red *redactor) (*engineLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// An existing file (a retry of the same trial) keeps its mode otherwise.
	_ = f.Chmod(0o600)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxLogBytes
	}
	return &engineLog{path: path, max: maxBytes, red: red, f: f, size: st.Size()}, nil
}

// header writes the tuner's own lines (already free of secrets).
func (l *engineLog) header(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write([]byte(s))
}

// copyFrom reads the pipe until EOF or an error (the read end closed).
func (l *engineLog) copyFrom(r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			l.mu.Lock()
			l.busy = true
			l.mu.Unlock()
			l.feed(buf[:n])
		}
		if err != nil {
			l.mu.Lock()
			l.flushLine()
			l.busy = false
			l.mu.Unlock()
			return
		}
	}
}

// feed takes one chunk of output.
func (l *engineLog) feed(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() { l.busy = false }()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.line = append(l.line, p...)
			if len(l.line) > maxLine {
				c := l.red.cut(l.line)
				l.write(l.red.mask(l.line[:c]))
				l.line = append(l.line[:0], l.line[c:]...)
			}
			return
		}
		l.line = append(l.line, p[:i+1]...)
		p = p[i+1:]
		l.write(l.red.mask(l.line))
		l.line = l.line[:0]
	}
}

// flushLine writes the partial line. Caller holds mu.
func (l *engineLog) flushLine() {
	if len(l.line) > 0 {
		l.write(l.red.mask(l.line))
		l.line = l.line[:0]
	}
}

// write appends b, rotating first when it would pass max. Caller holds mu.
func (l *engineLog) write(b []byte) {
	if l.f == nil {
		return
	}
	if l.size > 0 && l.size+int64(len(b)) > l.max {
		l.rotate()
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil && l.err == nil {
		l.err = err
	}
}

// rotate moves the file to PATH.1 and starts a new one. Caller holds mu.
func (l *engineLog) rotate() {
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("rotate engine log: %w", err)
		}
		return
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		l.err = errors.Join(l.err, fmt.Errorf("rotate engine log: %w", err))
		return
	}
	l.f.Close()
	l.f, l.size, l.rotated = f, 0, true
	n, _ := fmt.Fprintf(f, "# tuner: %s: log passed %d bytes; the previous part is in %s.1, older output was dropped\n",
		time.Now().UTC().Format(time.RFC3339), l.max, l.path)
	l.size += int64(n)
}

// sync waits until the output the engine wrote so far is in the file, at
// most d, and writes a partial last line out too. EOF on the pipe (every
// writer gone) is definite; while a worker still holds the pipe, the pipe
// counts as drained when no byte waits in it (pending, -1: unknown) and no
// chunk is being processed, three times in a row.
func (l *engineLog) sync(eof <-chan struct{}, pending func() int, d time.Duration) {
	deadline := time.Now().Add(d)
	idle := 0
	for idle < 3 && time.Now().Before(deadline) {
		select {
		case <-eof:
			idle = 3
			continue
		case <-time.After(2 * time.Millisecond):
		}
		l.mu.Lock()
		if !l.busy && pending() == 0 {
			idle++
		} else {
			idle = 0
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.flushLine()
	l.mu.Unlock()
}

// state returns whether the file rotated and the first write error.
func (l *engineLog) state() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rotated, l.err
}

func (l *engineLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLine()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// engineSecrets are the values StartEngine masks in the engine's output:
// those of secret-named variables of env and of secret flags in args.
func engineSecrets(env, args []string) []string {
	var out []string
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && SecretName(k) {
			out = append(out, v)
		}
	}
	for i := 0; i < len(args); i++ {
		name, v, hasEq := strings.Cut(args[i], "=")
		if !strings.HasPrefix(name, "--") || !SecretName(name) {
			continue
		}
		if !hasEq {
			if i+1 >= len(args) {
				break
			}
			i++
			v = args[i]
		}
		out = append(out, v)
	}
	return out
}
