package trial

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// RawVersion is the format version of the per-trial raw data file.
const RawVersion = 1

// RawHeader is the first line of a raw data file.
type RawHeader struct {
	Version  int        `json:"version"`
	ConfigID string     `json:"config_id,omitempty"`
	Workload string     `json:"workload,omitempty"`
	Levels   []RawLevel `json:"levels"`
}

// RawLevel names one load level of the file; Records is filled by ReadRaw.
type RawLevel struct {
	Concurrency int      `json:"concurrency,omitempty"`
	Rate        float64  `json:"rate,omitempty"`
	Records     []Record `json:"-"`
}

// rawRecord is one request on one line: times in nanoseconds, chunk
// arrivals as gaps (the first from the send), which compress well.
type rawRecord struct {
	Level  int     `json:"l"`
	Index  int     `json:"i"`
	Prompt int     `json:"p"`
	Output int     `json:"o"`
	Start  int64   `json:"s"`
	Gaps   []int64 `json:"c,omitempty"`
	End    int64   `json:"e"`
	Err    string  `json:"err,omitempty"`
	Warmup bool    `json:"w,omitempty"`
	Asked  int     `json:"a,omitempty"`  // Record.Requested
	Short  bool    `json:"tm,omitempty"` // Record.TokenMismatch
	Tenant string  `json:"t,omitempty"`  // Record.Tenant
}

// WriteRaw writes the records of every level to path as gzip-compressed
// JSON lines: a RawHeader, then one line per request. The file is written
// to a temporary name and renamed, so a reader never sees half a file.
func WriteRaw(path string, h RawHeader) (err error) {
	h.Version = RawVersion
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("raw data: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(f)
	bw := bufio.NewWriter(zw)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("raw data: %w", err)
	}
	for li, l := range h.Levels {
		for _, r := range l.Records {
			rr := rawRecord{Level: li, Index: r.Index, Prompt: r.PromptLen, Output: r.OutputLen,
				Start: int64(r.Start), End: int64(r.End), Err: r.Err, Warmup: r.Warmup, Asked: r.Requested, Short: r.TokenMismatch, Tenant: r.Tenant}
			prev := time.Duration(0)
			for _, c := range r.Chunks {
				rr.Gaps = append(rr.Gaps, int64(c-prev))
				prev = c
			}
			if err := enc.Encode(rr); err != nil {
				return fmt.Errorf("raw data: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("raw data: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("raw data: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("raw data: %w", err)
	}
	return os.Rename(tmp, path)
}

// ReadRaw reads a file written by WriteRaw; the records of each level are
// in h.Levels[i].Records, so Summarize can recompute any metric.
func ReadRaw(path string) (RawHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return RawHeader{}, fmt.Errorf("raw data: %w", err)
	}
	defer f.Close()
	return DecodeRaw(f)
}

// DecodeRaw is ReadRaw on a stream.
func DecodeRaw(r io.Reader) (RawHeader, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return RawHeader{}, fmt.Errorf("raw data: %w", err)
	}
	defer zr.Close()
	dec := json.NewDecoder(zr)
	var h RawHeader
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("raw data header: %w", err)
	}
	if h.Version != RawVersion {
		return h, fmt.Errorf("raw data: version %d, want %d", h.Version, RawVersion)
	}
	for n := 1; ; n++ {
		var rr rawRecord
		if err := dec.Decode(&rr); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return h, fmt.Errorf("raw data record %d: %w", n, err)
		}
		if rr.Level < 0 || rr.Level >= len(h.Levels) {
			return h, fmt.Errorf("raw data record %d: level %d of %d", n, rr.Level, len(h.Levels))
		}
		rec := Record{Index: rr.Index, PromptLen: rr.Prompt, OutputLen: rr.Output, Start: time.Duration(rr.Start),
			End: time.Duration(rr.End), Err: rr.Err, Warmup: rr.Warmup, Requested: rr.Asked, TokenMismatch: rr.Short, Tenant: rr.Tenant}
		if len(rr.Gaps) > 0 {
			rec.Chunks = make([]time.Duration, len(rr.Gaps))
			var at time.Duration
			for i, g := range rr.Gaps {
				at += time.Duration(g)
				rec.Chunks[i] = at
			}
		}
		h.Levels[rr.Level].Records = append(h.Levels[rr.Level].Records, rec)
	}
	return h, nil
}
