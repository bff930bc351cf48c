package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
	"math"
	"slices"
	"strings"
	"time"
)

// SummaryMetrics returns the metrics a Summary carries, in the order of
// Summary.Values: every name trial.Metrics.Value knows except aliases.
func SummaryMetrics() []string { return slices.Clone(summaryMetrics) }

var summaryMetrics = func() []string {
	names := []string{"output_throughput", "request_throughput", "total_token_throughput", "request_goodput", "error_rate"}
	for _, m := range []string{"ttft", "tpot", "itl", "e2el"} {
		for _, st := range []string{"mean", "median", "p90", "p95", "p99", "max"} {
			names = append(names, m+"_"+st)
		}
	}
	return names
}()

// summaryIndex maps a metric name (aliases included) to its position.
var summaryIndex = func() map[string]int {
	idx := make(map[string]int, len(summaryMetrics)+5)
	for i, n := range summaryMetrics {
		idx[n] = i
		if strings.HasSuffix(n, "_median") {
			idx[strings.TrimSuffix(n, "median")+"p50"] = i
		}
	}
	idx["goodput"] = idx["request_goodput"]
	return idx
}()

// Summary is the compact form of a trial that history queries return: what
// search-space pruning and surrogate training read (config, outcome, the
// primary level's aggregate metrics, VRAM), without the rest of the Result.
// It is kept beside each trial in the same transaction.
type Summary struct {
	V        int                `json:"v"`
	StudyID  string             `json:"study_id"`
	Seq      uint64             `json:"seq"`
	State    State              `json:"state"`
	ConfigID string             `json:"config_id"`
	Config   spaces.Config      `json:"config"`
	Repeat   int                `json:"repeat,omitempty"`
	Status   trial.Status       `json:"status,omitempty"`
	Failure  trial.FailureClass `json:"failure,omitempty"`
	Started  time.Time          `json:"started"`
	// Values holds SummaryMetrics() in order; empty when the result has no
	// primary level.
	Values      []float64 `json:"values,omitempty"`
	PeakVRAMGiB float64   `json:"peak_vram_gib,omitempty"`

	// What the list views (trials table, front, recommendation) read
	// beside the values, so that they never decode a full record: when
	// the trial ended and who ran it, how its VRAM was measured, the
	// engine arguments its workload added, and of the primary level the
	// request counts, overload, the figures its source lacked and the
	// optional metrics (summary version 2).
	Ended           time.Time          `json:"ended,omitzero"`
	Worker          string             `json:"worker,omitempty"`
	VRAMSource      string             `json:"vram_source,omitempty"`
	ServeArgs       []string           `json:"serve_args,omitempty"`
	Completed       int                `json:"completed,omitempty"`
	FailedRequests  int                `json:"failed_requests,omitempty"`
	TokenMismatches int                `json:"token_mismatches,omitempty"`
	Overloaded      bool               `json:"overloaded,omitempty"`
	Missing         []string           `json:"missing,omitempty"`
	PrefixCache     *trial.PrefixCache `json:"prefix_cache,omitempty"`
	Fairness        *trial.Fairness    `json:"fairness,omitempty"`
	// StartupS and TotalS are the result's Phases of those names (the
	// re-measurement's clock: tuner.Aggregate).
	StartupS float64 `json:"startup_s,omitempty"`
	TotalS   float64 `json:"total_s,omitempty"`
}

// ID is the trial's ID.
func (s *Summary) ID() string { return TrialID(s.StudyID, s.Seq) }

// Objective reads a metric like trial.Result.Objective does: false for
// failed trials, unknown names and trials without measurements.
func (s *Summary) Objective(name string) (float64, bool) {
	if s.Status == "" || s.Status == trial.StatusFailed {
		return 0, false
	}
	if name == "peak_vram_gib" || name == "vram" {
		return s.PeakVRAMGiB, true
	}
	if len(s.Values) != len(summaryMetrics) {
		return 0, false
	}
	i, ok := summaryIndex[name]
	if !ok || len(s.Missing) > 0 || s.PrefixCache != nil || s.Fairness != nil {
		return s.Metrics().Value(name) // the rarer names and rules
	}
	return s.Values[i], true
}

// Metrics rebuilds the primary level's aggregates (for SLO checks), or nil.
func (s *Summary) Metrics() *trial.Metrics {
	if len(s.Values) != len(summaryMetrics) {
		return nil
	}
	v := s.Values
	m := &trial.Metrics{OutputThroughput: v[0], RequestThroughput: v[1], TotalTokenThroughput: v[2], RequestGoodput: v[3], ErrorRate: v[4],
		Completed: s.Completed, Failed: s.FailedRequests, TokenMismatches: s.TokenMismatches, Overloaded: s.Overloaded,
		Missing: s.Missing, PrefixCache: s.PrefixCache, Fairness: s.Fairness}
	for k, d := range []*trial.Dist{&m.TTFT, &m.TPOT, &m.ITL, &m.E2EL} {
		o := 5 + 6*k
		d.Mean, d.Median, d.P90, d.P95, d.P99, d.Max = v[o], v[o+1], v[o+2], v[o+3], v[o+4], v[o+5]
	}
	return m
}

// Result is the part of the trial's result the summary keeps: outcome,
// VRAM, serve arguments and the primary level's aggregates as its only
// level (nil for a trial without a result). What reads verdicts,
// objectives and SLO checks reads it as it reads the full result.
func (s *Summary) Result() *trial.Result {
	if s.Status == "" {
		return nil
	}
	r := &trial.Result{Config: s.Config, ConfigID: s.ConfigID, Status: s.Status, Failure: s.Failure,
		PeakVRAMGiB: s.PeakVRAMGiB, VRAMSource: s.VRAMSource, ServeArgs: s.ServeArgs,
		Phases: trial.Phases{StartupS: s.StartupS, TotalS: s.TotalS}}
	if m := s.Metrics(); m != nil {
		r.Levels = []trial.Level{{Metrics: *m}}
	}
	return r
}

// Trial is the trial as its summary tells it, what the list views (trials
// table, front, recommendation, studies) read: its Result is the
// summary's (Result), never the full record.
func (s *Summary) Trial() Trial {
	return Trial{ID: s.ID(), StudyID: s.StudyID, Seq: s.Seq, State: s.State, ConfigID: s.ConfigID,
		Config: s.Config, Repeat: s.Repeat, Result: s.Result(), Started: s.Started, Ended: s.Ended, Worker: s.Worker}
}

// SummaryTrials reads a study's trials from their summaries
// (Summary.Trial), in sequence order.
func SummaryTrials(ctx context.Context, db DB, studyID string, f TrialFilter) ([]Trial, error) {
	sums, err := db.Summaries(ctx, studyID, f)
	if err != nil {
		return nil, err
	}
	out := make([]Trial, len(sums))
	for i := range sums {
		out[i] = sums[i].Trial()
	}
	return out, nil
}

// summarize derives a trial's summary.
func Summarize(t *Trial) Summary {
	s := Summary{V: RecordVersion, StudyID: t.StudyID, Seq: t.Seq, State: t.State, ConfigID: t.ConfigID,
		Config: t.Config, Repeat: t.Repeat, Started: t.Started, Ended: t.Ended, Worker: t.Worker}
	if r := t.Result; r != nil {
		s.Status, s.Failure, s.PeakVRAMGiB, s.VRAMSource, s.ServeArgs = r.Status, r.Failure, r.PeakVRAMGiB, r.VRAMSource, r.ServeArgs
		s.StartupS, s.TotalS = r.Phases.StartupS, r.Phases.TotalS
		if m := r.Metrics(); m != nil {
			// The fields as they are (Missing says which were not
			// measured), in the order Metrics rebuilds them.
			s.Values = append(make([]float64, 0, len(summaryMetrics)),
				m.OutputThroughput, m.RequestThroughput, m.TotalTokenThroughput, m.RequestGoodput, m.ErrorRate)
			for _, d := range []*trial.Dist{&m.TTFT, &m.TPOT, &m.ITL, &m.E2EL} {
				s.Values = append(s.Values, d.Mean, d.Median, d.P90, d.P95, d.P99, d.Max)
			}
			s.Completed, s.FailedRequests, s.TokenMismatches, s.Overloaded = m.Completed, m.Failed, m.TokenMismatches, m.Overloaded
			s.Missing, s.PrefixCache, s.Fairness = m.Missing, m.PrefixCache, m.Fairness
		}
	}
	return s
}

// Summaries are a derived index (rebuilt from the trial records whenever
// they are written, verified by Check), so they use a compact binary form
// rather than JSON: decoding one takes about a microsecond instead of tens.
//
//	byte     summaryVersion
//	uvarint  seq
//	string   state, config ID          (string = uvarint length + bytes)
//	uvarint  repeat
//	string   status, failure
//	varint   started: Unix seconds; uvarint: nanoseconds
//	8 bytes  peak VRAM GiB (IEEE 754 bits, big-endian)
//	uvarint  number of values (0 or len(summaryMetrics)), then 8 bytes each
//	uvarint  number of config params, then for each:
//	         string name, byte kind (i, f, b, c), value
//	         (i: varint; f: 8 bytes; b: 1 byte; c: string)
//
//	then, from version 2 on:
//	byte     has ended; if set, varint seconds, uvarint nanoseconds
//	string   worker, VRAM source
//	uvarint  number of serve args, then a string each
//	uvarint  completed, failed requests, token mismatches
//	byte     flags: 1 overloaded, 2 prefix cache, 4 fairness
//	uvarint  number of missing names, then a string each
//	         prefix cache: 3 x 8 bytes (queried, hits, hit rate)
//	         fairness: 2 x 8 bytes (TTFT, E2EL p95 ratios), string worst, best
//	8 bytes  startup seconds, 8 bytes total seconds (Result.Phases)
//
// The study ID is the bucket's name and is not repeated. Version 1 (before
// the list views read summaries) decodes without the version 2 fields;
// stores rewrite it when they migrate.
const summaryVersion = 2

func EncodeSummary(s *Summary) []byte {
	b := make([]byte, 0, 64+8*len(s.Values)+24*s.Config.Len())
	putStr := func(x string) {
		b = binary.AppendUvarint(b, uint64(len(x)))
		b = append(b, x...)
	}
	putF := func(f float64) { b = binary.BigEndian.AppendUint64(b, math.Float64bits(f)) }
	b = append(b, summaryVersion)
	b = binary.AppendUvarint(b, s.Seq)
	putStr(string(s.State))
	putStr(s.ConfigID)
	b = binary.AppendUvarint(b, uint64(s.Repeat))
	putStr(string(s.Status))
	putStr(string(s.Failure))
	b = binary.AppendVarint(b, s.Started.Unix())
	b = binary.AppendUvarint(b, uint64(s.Started.Nanosecond()))
	putF(s.PeakVRAMGiB)
	b = binary.AppendUvarint(b, uint64(len(s.Values)))
	for _, v := range s.Values {
		putF(v)
	}
	names := s.Config.Names()
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		v, _ := s.Config.Get(n)
		putStr(n)
		switch v.Kind() {
		case spaces.Int:
			b = append(b, 'i')
			b = binary.AppendVarint(b, int64(v.Int()))
		case spaces.Float:
			b = append(b, 'f')
			putF(v.Float())
		case spaces.Bool:
			b = append(b, 'b')
			if v.Bool() {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		default:
			b = append(b, 'c')
			putStr(v.Str())
		}
	}
	if s.Ended.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendVarint(b, s.Ended.Unix())
		b = binary.AppendUvarint(b, uint64(s.Ended.Nanosecond()))
	}
	putStr(s.Worker)
	putStr(s.VRAMSource)
	putStrs := func(xs []string) {
		b = binary.AppendUvarint(b, uint64(len(xs)))
		for _, x := range xs {
			putStr(x)
		}
	}
	putStrs(s.ServeArgs)
	for _, n := range []int{s.Completed, s.FailedRequests, s.TokenMismatches} {
		b = binary.AppendUvarint(b, uint64(max(n, 0)))
	}
	var flags byte
	if s.Overloaded {
		flags |= 1
	}
	if s.PrefixCache != nil {
		flags |= 2
	}
	if s.Fairness != nil {
		flags |= 4
	}
	b = append(b, flags)
	putStrs(s.Missing)
	if p := s.PrefixCache; p != nil {
		putF(p.QueriedTokens)
		putF(p.HitTokens)
		putF(p.HitRate)
	}
	if f := s.Fairness; f != nil {
		putF(f.TTFTP95Ratio)
		putF(f.E2ELP95Ratio)
		putStr(f.Worst)
		putStr(f.Best)
	}
	putF(s.StartupS)
	putF(s.TotalS)
	return b
}

// summaryReader decodes the binary form; the first error sticks.
type summaryReader struct {
	b   []byte
	err error
}

func (r *summaryReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("summary: bad %s", what)
	}
	r.b = nil
}

func (r *summaryReader) uvarint(what string) uint64 { return readVar(r, what, binary.Uvarint) }

func (r *summaryReader) varint(what string) int64 { return readVar(r, what, binary.Varint) }

// readVar consumes one varint decoded by read (binary.Uvarint or
// binary.Varint); a short or overlong one fails the reader.
func readVar[T int64 | uint64](r *summaryReader, what string, read func([]byte) (T, int)) T {
	v, n := read(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *summaryReader) str(what string) string {
	n := r.uvarint(what)
	if n > uint64(len(r.b)) {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *summaryReader) f64(what string) float64 {
	if len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *summaryReader) byte1(what string) byte {
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// decodeSummary decodes a summary stored in studyID's bucket.
func DecodeSummary(studyID string, b []byte) (Summary, error) {
	r := &summaryReader{b: b}
	if v := r.byte1("version"); r.err == nil && (v < 1 || v > summaryVersion) {
		if v > summaryVersion {
			return Summary{}, fmt.Errorf("summary version %d: %w", v, ErrTooNew)
		}
		return Summary{}, fmt.Errorf("summary version %d", v)
	}
	version := summaryVersion
	if len(b) > 0 {
		version = int(b[0])
	}
	s := Summary{V: RecordVersion, StudyID: studyID}
	s.Seq = r.uvarint("seq")
	s.State = State(r.str("state"))
	s.ConfigID = r.str("config id")
	rep := r.uvarint("repeat")
	s.Status = trial.Status(r.str("status"))
	s.Failure = trial.FailureClass(r.str("failure"))
	sec := r.varint("start time")
	nsec := r.uvarint("start time")
	s.PeakVRAMGiB = r.f64("peak vram")
	nv := r.uvarint("values")
	if r.err == nil && nv != 0 && nv != uint64(len(summaryMetrics)) {
		r.fail("value count")
	}
	if nv > 0 && r.err == nil {
		s.Values = make([]float64, nv)
		for i := range s.Values {
			s.Values[i] = r.f64("value")
		}
	}
	// Every count read from the file is checked against the bytes left
	// before anything is sized from it: a param takes at least 3 bytes
	// (name length, kind, value).
	np := r.uvarint("param count")
	if np > uint64(len(r.b))/3 {
		r.fail("param count")
	}
	if r.err != nil {
		np = 0
	}
	params := make(map[string]spaces.Value, np)
	for i := uint64(0); i < np && r.err == nil; i++ {
		name := r.str("param name")
		switch r.byte1("param kind") {
		case 'i':
			params[name] = spaces.IntValue(int(r.varint("int param")))
		case 'f':
			params[name] = spaces.FloatValue(r.f64("float param"))
		case 'b':
			params[name] = spaces.BoolValue(r.byte1("bool param") != 0)
		case 'c':
			params[name] = spaces.StringValue(r.str("string param"))
		default:
			r.fail("param kind")
		}
	}
	if version >= 2 && r.err == nil {
		r.trailer(&s)
	}
	switch {
	case r.err != nil:
		return Summary{}, r.err
	case len(r.b) != 0:
		return Summary{}, fmt.Errorf("summary: %d trailing bytes", len(r.b))
	case s.Seq == 0 || !s.State.Valid() || nsec >= 1e9 || rep > math.MaxInt32:
		return Summary{}, fmt.Errorf("summary: bad fields (seq %d, state %q)", s.Seq, s.State)
	}
	s.Repeat = int(rep)
	s.Started = time.Unix(sec, int64(nsec)).UTC()
	s.Config = spaces.NewConfig(params)
	return s, nil
}

// trailer reads the fields of version 2 (see EncodeSummary).
func (r *summaryReader) trailer(s *Summary) {
	if r.byte1("ended") != 0 {
		sec := r.varint("end time")
		nsec := r.uvarint("end time")
		if nsec >= 1e9 {
			r.fail("end time")
		}
		s.Ended = time.Unix(sec, int64(nsec)).UTC()
	}
	s.Worker = r.str("worker")
	s.VRAMSource = r.str("vram source")
	strs := func(what string) []string {
		n := r.uvarint(what)
		if n > uint64(len(r.b)) { // a string takes at least a byte
			r.fail(what)
			return nil
		}
		var out []string
		for i := uint64(0); i < n && r.err == nil; i++ {
			out = append(out, r.str(what))
		}
		return out
	}
	s.ServeArgs = strs("serve args")
	count := func(what string) int {
		n := r.uvarint(what)
		if n > math.MaxInt32 {
			r.fail(what)
		}
		return int(n)
	}
	s.Completed, s.FailedRequests, s.TokenMismatches = count("completed"), count("failed requests"), count("token mismatches")
	flags := r.byte1("flags")
	s.Overloaded = flags&1 != 0
	s.Missing = strs("missing")
	if flags&2 != 0 {
		s.PrefixCache = &trial.PrefixCache{QueriedTokens: r.f64("prefix cache"), HitTokens: r.f64("prefix cache"), HitRate: r.f64("prefix cache")}
	}
	if flags&4 != 0 {
		s.Fairness = &trial.Fairness{TTFTP95Ratio: r.f64("fairness"), E2ELP95Ratio: r.f64("fairness"), Worst: r.str("fairness"), Best: r.str("fairness")}
	}
	s.StartupS, s.TotalS = r.f64("startup"), r.f64("total")
}

// decodeSealedSummary verifies a stored summary and decodes it.
func DecodeSealedSummary(studyID string, b []byte) (Summary, error) {
	payload, err := Unseal(b, false)
	if err != nil {
		return Summary{}, fmt.Errorf("summary: %w", err)
	}
	return DecodeSummary(studyID, payload)
}
