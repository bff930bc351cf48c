package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/trial"
)

// Request is the raw record of one benchmark request as a run keeps it:
// times at microsecond resolution, the inter-token latencies as a
// summary (mean, median, p99, max) instead of every chunk.
type Request struct {
	Level  int           `json:"level"` // index of the cell's load level
	Index  int           `json:"index"`
	Start  time.Duration `json:"start"` // send, from the level's start
	Prompt int           `json:"prompt_tokens"`
	Output int           `json:"output_tokens"`
	TTFT   time.Duration `json:"ttft"`
	E2EL   time.Duration `json:"e2el"`
	ITL    ITLSummary    `json:"itl"`
	Err    string        `json:"error,omitempty"` // error class; "" for a success
	Warmup bool          `json:"warmup,omitempty"`
}

// ITLSummary summarises one request's inter-token latencies.
type ITLSummary struct {
	Mean time.Duration `json:"mean"`
	P50  time.Duration `json:"p50"`
	P99  time.Duration `json:"p99"`
	Max  time.Duration `json:"max"`
}

// OK reports whether the request succeeded.
func (r *Request) OK() bool { return r.Err == "" }

// TPOT is (E2EL - TTFT) / (output - 1); ok is false for one token or a failure.
func (r *Request) TPOT() (time.Duration, bool) {
	if !r.OK() || r.Output <= 1 {
		return 0, false
	}
	return (r.E2EL - r.TTFT) / time.Duration(r.Output-1), true
}

// Value is a per-request metric in milliseconds ("ttft", "tpot", "itl" (the
// request's mean), "e2el"); ok is false when the request has none (a
// failure, TPOT of one token). The regression gate compares these samples.
func (r *Request) Value(metric string) (float64, bool) {
	if !r.OK() {
		return 0, false
	}
	switch metric {
	case "ttft":
		return msOf(r.TTFT), true
	case "e2el":
		return msOf(r.E2EL), true
	case "tpot":
		d, ok := r.TPOT()
		return msOf(d), ok
	case "itl":
		return msOf(r.ITL.Mean), r.Output > 1
	}
	return 0, false
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// errorClass is a request's error class (trial.RequestErrorClass), "" when
// it succeeded.
func errorClass(msg string) string {
	if msg == "" {
		return ""
	}
	return trial.RequestErrorClass(msg)
}

// FromRecord turns a client record of load level `level` into a Request.
func FromRecord(level int, rec *trial.Record) Request {
	r := Request{Level: level, Index: rec.Index, Start: rec.Start.Truncate(time.Microsecond), Prompt: rec.PromptLen,
		Output: rec.Tokens(), Err: errorClass(rec.Err), Warmup: rec.Warmup}
	if rec.Err == "" && len(rec.Chunks) == 0 {
		r.Err = "no_content"
	}
	if r.OK() {
		r.TTFT = rec.TTFT().Truncate(time.Microsecond)
		r.E2EL = rec.Latency().Truncate(time.Microsecond)
		r.ITL = itlSummary(rec.Chunks)
	} else {
		r.E2EL = rec.End.Truncate(time.Microsecond)
	}
	return r
}

func itlSummary(chunks []time.Duration) ITLSummary {
	if len(chunks) < 2 {
		return ITLSummary{}
	}
	gaps := make([]float64, len(chunks)-1)
	for i := 1; i < len(chunks); i++ {
		gaps[i-1] = float64(chunks[i] - chunks[i-1])
	}
	d := trial.Distribution(gaps)
	us := func(v float64) time.Duration { return time.Duration(math.Round(v/1e3)) * time.Microsecond }
	return ITLSummary{Mean: us(d.Mean), P50: us(d.Median), P99: us(d.P99), Max: us(d.Max)}
}

// Record is the trial.Record equivalent of r for trial.Summarize: the
// first content chunk and End stand for the stream (so TTFT, TPOT, E2EL,
// throughputs and goodput are exact; ITL is not there, see Summarize).
func (r *Request) Record() trial.Record { return r.record(make([]time.Duration, 0, 1)) }

// record is Record with the chunk appended to buf (len 0, cap 1).
func (r *Request) record(buf []time.Duration) trial.Record {
	rec := trial.Record{Index: r.Index, PromptLen: r.Prompt, OutputLen: r.Output, Start: r.Start, End: r.E2EL, Warmup: r.Warmup}
	if !r.OK() {
		rec.Err = r.Err
		return rec
	}
	// One chunk: End carries E2EL (Record.Latency), and trial.Summarize
	// pools no ITL gap it would only sort to have it replaced.
	rec.Chunks = append(buf, r.TTFT)
	return rec
}

// Raw data encoding: gzip over a magic, a string table of error classes
// and, per request, varints (deltas for index and start; microseconds).
const rawMagic = "TBR1"

// EncodeRaw compresses requests (about 20 bytes a request).
func EncodeRaw(reqs []Request) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(zw, 1<<16)
	bw.WriteString(rawMagic)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	sv := func(v int64) { bw.Write(tmp[:binary.PutVarint(tmp[:], v)]) }
	us := func(d time.Duration) uint64 { return uint64(max(0, d/time.Microsecond)) }
	var classes []string
	idx := map[string]int{"": 0}
	for i := range reqs {
		if _, ok := idx[reqs[i].Err]; !ok {
			idx[reqs[i].Err] = len(classes) + 1
			classes = append(classes, reqs[i].Err)
		}
	}
	uv(uint64(len(classes)))
	for _, c := range classes {
		uv(uint64(len(c)))
		bw.WriteString(c)
	}
	uv(uint64(len(reqs)))
	var prevIdx int64
	var prevStart int64
	for i := range reqs {
		r := &reqs[i]
		uv(uint64(r.Level))
		sv(int64(r.Index) - prevIdx)
		prevIdx = int64(r.Index)
		st := int64(r.Start / time.Microsecond)
		sv(st - prevStart)
		prevStart = st
		uv(uint64(max(0, r.Prompt)))
		uv(uint64(max(0, r.Output)))
		flags := uint64(idx[r.Err]) << 1
		if r.Warmup {
			flags |= 1
		}
		uv(flags)
		uv(us(r.E2EL))
		if r.OK() {
			uv(us(r.TTFT))
			uv(us(r.ITL.Mean))
			uv(us(r.ITL.P50))
			uv(us(r.ITL.P99))
			uv(us(r.ITL.Max))
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ErrRawData reports raw data that cannot be decoded.
var ErrRawData = errors.New("bench: bad raw data")

// maxRawRequests bounds a decode (a corrupt count must not allocate GBs).
const maxRawRequests = 50_000_000

// DecodeRaw reads what EncodeRaw wrote.
func DecodeRaw(b []byte) ([]Request, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRawData, err)
	}
	// Decompressed whole (about 25 MB for a million requests): varints off
	// a slice are several times faster than through a reader.
	var buf bytes.Buffer
	buf.Grow(min(4*len(b)+64, 1<<30)) // about 1.3x expansion: one allocation
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRawData, err)
	}
	data := buf.Bytes()
	if !bytes.HasPrefix(data, []byte(rawMagic)) {
		return nil, fmt.Errorf("%w: no %s header", ErrRawData, rawMagic)
	}
	data = data[len(rawMagic):]
	var rerr error
	uv := func() uint64 { return readVarint(&data, &rerr, binary.Uvarint) }
	sv := func() int64 { return readVarint(&data, &rerr, binary.Varint) }
	d := func() time.Duration { return time.Duration(uv()) * time.Microsecond }
	nc := uv()
	if rerr != nil || nc > 1<<16 {
		return nil, fmt.Errorf("%w: error table", ErrRawData)
	}
	classes := []string{""}
	for range nc {
		n := uv()
		if rerr != nil || n > 1<<10 {
			return nil, fmt.Errorf("%w: error table", ErrRawData)
		}
		if uint64(len(data)) < n {
			return nil, fmt.Errorf("%w: error table: %w", ErrRawData, io.ErrUnexpectedEOF)
		}
		classes = append(classes, string(data[:n]))
		data = data[n:]
	}
	n := uv()
	if rerr != nil || n > maxRawRequests || n > uint64(len(data)) {
		return nil, fmt.Errorf("%w: request count", ErrRawData)
	}
	out := make([]Request, 0, n) // n <= len(data): every request takes bytes
	var idx, start int64
	for range n {
		var r Request
		r.Level = int(uv())
		idx += sv()
		r.Index = int(idx)
		start += sv()
		r.Start = time.Duration(start) * time.Microsecond
		r.Prompt = int(uv())
		r.Output = int(uv())
		flags := uv()
		r.Warmup = flags&1 != 0
		ci := flags >> 1
		if ci >= uint64(len(classes)) {
			return nil, fmt.Errorf("%w: error class %d of %d", ErrRawData, ci, len(classes))
		}
		r.Err = classes[ci]
		r.E2EL = d()
		if r.OK() {
			r.TTFT = d()
			r.ITL = ITLSummary{Mean: d(), P50: d(), P99: d(), Max: d()}
		}
		if rerr != nil {
			return nil, fmt.Errorf("%w: request %d: %w", ErrRawData, len(out), rerr)
		}
		out = append(out, r)
	}
	return slices.Clip(out), nil
}

// Samples are the per-request values of metric ("ttft", "tpot", "e2el";
// ms) of the measured (non-warm-up) successful requests of one load level,
// in request order: what a regression test compares between two runs'
// cells. For "itl" they are the level's inter-token gaps (ITLGaps), not a
// value per request: ITL pools every gap, as vLLM's bench and the level's
// own metrics do.
func Samples(reqs []Request, level int, metric string) []float64 {
	if metric == "itl" {
		return ITLGaps(reqs, func(r *Request) bool { return r.Level == level })
	}
	var out []float64
	for i := range reqs {
		r := &reqs[i]
		if r.Level != level || r.Warmup {
			continue
		}
		if v, ok := r.Value(metric); ok {
			out = append(out, v)
		}
	}
	return out
}

// maxITLGaps bounds ITLGaps: past it each request's gaps are thinned in
// proportion (a million gaps would make every permutation of a tail test
// cost a million steps and tell no more).
const maxITLGaps = 20000

// ITLGaps are the inter-token gaps (ms) of the measured successful
// requests that keep accepts, in request order: every request stands for
// its output-1 gaps, spread over its own gap distribution as its ITL
// summary describes it (ITLSummary.quantile), so that the pooled values'
// quantiles are the level's ITL quantiles over every gap, and a request
// with a 40 ms stall among 7 ms tokens shows it in the pooled p99 where a
// per-request mean (which is TPOT) averages it away. Beyond maxITLGaps
// gaps in all, each request keeps a proportional share (at least one).
func ITLGaps(reqs []Request, keep func(*Request) bool) []float64 {
	total := 0
	for i := range reqs {
		if r := &reqs[i]; r.usableITL() && keep(r) {
			total += r.Output - 1
		}
	}
	scale := min(1, float64(maxITLGaps)/float64(max(1, total)))
	out := make([]float64, 0, min(total, maxITLGaps+len(reqs)))
	for i := range reqs {
		r := &reqs[i]
		if !r.usableITL() || !keep(r) {
			continue
		}
		k := max(1, int(math.Round(float64(r.Output-1)*scale)))
		for j := range k {
			out = append(out, r.ITL.quantile((float64(j)+0.5)/float64(k)))
		}
	}
	return out
}

func (r *Request) usableITL() bool { return !r.Warmup && r.OK() && r.Output > 1 }

// quantile is the u-quantile (ms) of a request's gaps, read off a
// piecewise-linear quantile function through the points the summary
// fixes: u 0.5 at P50, 0.99 at P99, 1 at Max, and u 0 at the value that
// makes the function's mean the summary's Mean (kept within [0, P50]).
func (s ITLSummary) quantile(u float64) float64 {
	mean, p50, p99, mx := msOf(s.Mean), msOf(s.P50), msOf(s.P99), msOf(s.Max)
	// Mean of the function: 0.25(lo+p50) + 0.245(p50+p99) + 0.005(p99+max).
	lo := 4*(mean-0.245*(p50+p99)-0.005*(p99+mx)) - p50
	lo = max(0, min(p50, lo))
	switch {
	case u <= 0.5:
		return lo + (p50-lo)*u/0.5
	case u <= 0.99:
		return p50 + (p99-p50)*(u-0.5)/0.49
	}
	return p99 + (mx-p99)*(u-0.99)/0.01
}

// readVarint reads one varint off the front of *data; at the end of the
// data (or a malformed varint) it notes io.ErrUnexpectedEOF in *rerr,
// empties *data and returns 0.
func readVarint[T uint64 | int64](data *[]byte, rerr *error, read func([]byte) (T, int)) T {
	v, n := read(*data)
	if n <= 0 {
		if *rerr == nil {
			*rerr = io.ErrUnexpectedEOF
		}
		*data = nil
		return 0
	}
	*data = (*data)[n:]
	return v
}
