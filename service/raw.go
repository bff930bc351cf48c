package service

import (
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// rawSuffix ends the name of every raw data file the trial runner writes.
const rawSuffix = ".raw.jsonl.gz"

// trialRaw sends a trial's per-request raw data: the file the runner wrote
// beside the engine log (`tuner show` prints its path; trial.ReadRaw reads
// it): gzip-compressed JSON lines, a header then one line per request.
// ?format=jsonl sends it uncompressed. Only a file named and shaped as a raw
// data file is sent, whatever path the record holds.
func (s *Server) trialRaw(w http.ResponseWriter, r *http.Request) {
	format := cmp.Or(r.URL.Query().Get("format"), "gz")
	if format != "gz" && format != "jsonl" {
		s.writeErr(w, tuner.Usagef("format %q: want gz or jsonl", format))
		return
	}
	t, err := s.db.Trial(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if t.Result == nil || t.Result.RawPath == "" {
		s.writeErr(w, fmt.Errorf("trial %s has no raw data (sim-virtual trials and trials without a measurement keep none): %w", t.ID, store.ErrNotFound))
		return
	}
	f, err := openRaw(t.Result.RawPath)
	if err != nil {
		s.writeErr(w, fmt.Errorf("trial %s: %w", t.ID, err))
		return
	}
	defer f.Close()
	name := t.ID + rawSuffix
	var body io.Reader = f
	if format == "jsonl" {
		zr, err := gzip.NewReader(f)
		if err != nil {
			s.writeErr(w, err)
			return
		}
		defer zr.Close()
		body, name = zr, strings.TrimSuffix(name, ".gz")
		w.Header().Set("Content-Type", "application/jsonl")
	} else {
		w.Header().Set("Content-Type", "application/gzip")
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	if _, err := io.Copy(w, body); err != nil {
		s.log.Warn("raw data download", "trial", t.ID, "err", err)
	}
}

// openRaw opens a raw data file after checking its name and its header.
func openRaw(path string) (*os.File, error) {
	if !strings.HasSuffix(path, rawSuffix) {
		return nil, fmt.Errorf("raw data %q: not a raw data file name: %w", path, store.ErrNotFound)
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("raw data file is gone: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var h trial.RawHeader
	zr, err := gzip.NewReader(f)
	if err == nil {
		err = json.NewDecoder(zr).Decode(&h)
	}
	if err == nil && h.Version != trial.RawVersion {
		err = fmt.Errorf("version %d", h.Version)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("raw data file: %v: %w", err, store.ErrNotFound)
	}
	return f, nil
}
