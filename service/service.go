package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

//go:embed web
var webFiles embed.FS

// DefaultMaxBody is the largest request body the API reads.
const DefaultMaxBody = 64 << 10

// Config configures a Server.
type Config struct {
	// DB is the database (a bbolt file or PostgreSQL: see dbopen).
	DB store.DB
	// DataDir is where files beside the database go (engine logs): see
	// dbopen.DataDir.
	DataDir string
	// Shared runs searches as workers of their studies (PostgreSQL: other
	// machines may serve the same studies).
	Shared bool
	// GPUSets are the CUDA_VISIBLE_DEVICES values of the GPU sets, one job
	// at a time each; empty: one set that leaves the variable alone.
	GPUSets []string
	// Token, when set, is required as a bearer token by every API call
	// (writes always; reads unless PublicRead).
	Token      string
	PublicRead bool
	MaxBody    int64 // request body limit in bytes; 0 = DefaultMaxBody
	// CacheStudies is how many studies stay decoded between requests; 0 =
	// DefaultCacheStudies.
	CacheStudies int
	Logger       *slog.Logger
	// Alerts receives a scheduled run's regression or failure (the
	// --alert-webhook of `tuner serve`); nil: alerts are only logged.
	Alerts *alert.Sender
	// Clock drives the schedules (nil: the system clock); Location is the
	// time zone of their cron expressions (nil: the server's local zone).
	Clock    Clock
	Location *time.Location
}

// Server serves the API and runs the job queue.
type Server struct {
	cfg     Config
	db      store.DB
	cache   *studyCache
	log     *slog.Logger
	metrics *metrics
	hub     *hub

	mu      sync.Mutex
	cancels map[string]context.CancelFunc // running jobs
	wake    chan struct{}
	ready   chan struct{}

	clock     Clock
	started   time.Time // when the scheduler started: earlier slots were missed
	schedWake chan struct{}
	alerts    sync.WaitGroup // deliveries in flight
}

// New returns a server; Run starts its job workers.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("service: no database")
	}
	if len(cfg.GPUSets) == 0 {
		cfg.GPUSets = []string{""}
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	clock := cfg.Clock
	if clock == nil {
		clock = systemClock{}
	}
	return &Server{
		cfg: cfg, db: cfg.DB, cache: newStudyCache(cfg.CacheStudies), log: cfg.Logger, metrics: newMetrics(), hub: newHub(),
		cancels: map[string]context.CancelFunc{}, wake: make(chan struct{}, 1), ready: make(chan struct{}),
		clock: clock, schedWake: make(chan struct{}, 1),
	}, nil
}

// Handler is the service's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	read := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.auth(h, !s.cfg.PublicRead)) }
	write := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.auth(h, true)) }

	read("GET /api/v1/studies", s.listStudies)
	read("GET /api/v1/studies/{id}", s.getStudy)
	read("GET /api/v1/studies/{id}/trials", s.studyTrials)
	read("GET /api/v1/studies/{id}/front", s.studyFront)
	read("GET /api/v1/studies/{id}/front.html", s.studyFrontHTML)
	read("GET /api/v1/studies/{id}/recommend", s.recommend)
	read("GET /api/v1/trials/{id}", s.getTrial)
	read("GET /api/v1/trials/{id}/raw", s.trialRaw)
	read("GET /api/v1/studies/{id}/charts/{kind}", s.studyChart)
	read("GET /api/v1/trials/{id}/charts/{kind}", s.trialChart)
	read("GET /api/v1/trials/{id}/log", s.trialLog)
	read("GET /api/v1/space", s.space)
	read("GET /api/v1/jobs", s.listJobs)
	read("GET /api/v1/jobs/{id}", s.getJob)
	read("GET /api/v1/events", s.events)
	s.benchRoutes(read)
	write("POST /api/v1/jobs", s.postJob)
	write("POST /api/v1/jobs/{id}/cancel", s.cancelJob)
	s.scheduleRoutes(read, write)
	read("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-s.ready:
			io.WriteString(w, "ready\n")
		default:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	})
	sub, _ := fs.Sub(webFiles, "web")
	mux.Handle("GET /", http.FileServerFS(sub))
	return mux
}

// auth requires the bearer token (when one is configured) of calls that
// need it, compared in constant time.
func (s *Server) auth(h http.Handler, required bool) http.Handler {
	if s.cfg.Token == "" || !required {
		return h
	}
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// apiError is the body of every error answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Code: code, Message: msg})
}

// writeErr maps an error to its status: usage errors are the client's
// (400), missing records 404, the rest 500.
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	var ue tuner.UsageError
	switch {
	case errors.As(err, &ue):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, bounded.ErrLimit):
		writeError(w, http.StatusBadRequest, "too_large", err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, store.ErrExists):
		writeError(w, http.StatusConflict, "exists", err.Error())
	default:
		s.internalError(w, err)
	}
}

// internalError answers 500 with an incident ID and nothing of err: its
// text may name the server's files (the database path). The log has it
// under the same ID.
func (s *Server) internalError(w http.ResponseWriter, err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.log.Error("request failed", "incident", id, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error (incident "+id+"; the server's log has the details)")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ParseJob reads a job request body: a tuner.SearchSpec as JSON (unknown
// fields refused) over the CLI's defaults, validated as `tuner search`
// validates its flags. Options that name executables or directories of the
// server are refused: the server's operator sets those.
func ParseJob(body io.Reader) (tuner.SearchSpec, error) {
	req := struct {
		Kind string `json:"kind,omitempty"` // "search" or absent
		tuner.SearchSpec
	}{SearchSpec: tuner.DefaultSearchSpec()}
	err := decodeBody("job body", body, &req)
	spec := req.SearchSpec
	if err != nil {
		return spec, err
	}
	if req.Kind != "" && req.Kind != KindSearch {
		return spec, tuner.Usagef("job body: kind %q: want %q or %q", req.Kind, KindSearch, KindBench)
	}
	def := tuner.DefaultSearchSpec()
	for _, f := range []struct{ name, v, def string }{
		{"vllm", spec.VLLM, def.VLLM}, {"vllm_sim", spec.VLLMSim, ""}, {"log_dir", spec.LogDir, ""},
		{"space", spec.Space, ""}, {"profiles", spec.Profiles, ""}, {"surrogate", spec.Surrogate, ""},
	} {
		if f.v != f.def {
			return spec, tuner.Usagef("job body: %s names a file or program of the server: not settable over the API", f.name)
		}
	}
	if spec.DryRun {
		return spec, tuner.Usagef("job body: dry_run is a CLI preview (tuner search --dry-run)")
	}
	if strings.ContainsRune(spec.Workload, '/') || strings.HasSuffix(spec.Workload, ".yaml") {
		return spec, tuner.Usagef("job body: workload %q: only the built-in presets over the API", spec.Workload)
	}
	for _, e := range spec.Enqueue {
		if strings.HasPrefix(e, "@") {
			return spec, tuner.Usagef("job body: enqueue %q: @FILE is not readable over the API", e)
		}
	}
	if err := DefaultJobLimits().search(spec); err != nil {
		return spec, err
	}
	return spec, spec.Validate()
}

// decodeBody decodes a request body (what names it in errors: "job
// body") into v under bounded's limits (unknown fields refused, one JSON
// value).
func decodeBody(what string, body io.Reader, v any) error {
	b, err := bounded.ReadAll(what, body, bounded.Default().Bytes)
	if err == nil {
		err = bounded.DecodeJSON(what, b, v, true)
	}
	if err != nil {
		return tuner.Usagef("%s: %w", what, err)
	}
	return nil
}

func (s *Server) postJob(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, "job body")
	if !ok {
		return
	}
	nj, err := s.newJob(r.Context(), body, "")
	if err != nil {
		s.writeErr(w, err)
		return
	}
	j, err := s.db.AddJob(r.Context(), nj)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.log.Info("job queued", "job", j.ID, "kind", j.Kind)
	s.refreshQueue(r.Context())
	s.poke()
	s.hub.publish(Event{Job: j.ID, State: j.State})
	writeJSON(w, http.StatusCreated, j)
}

// readBody reads a request body of at most bounded's limit on a document
// (whatever MaxBody allows for other requests); false: the error is
// answered.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, what string) ([]byte, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, min(s.cfg.MaxBody, bounded.Default().Bytes))
	body, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", mbe.Limit))
		return nil, false
	}
	if err != nil {
		s.writeErr(w, tuner.Usagef("%s: %w", what, err))
		return nil, false
	}
	return body, true
}

// parseJob reads a job body of either kind.
func (s *Server) parseJob(ctx context.Context, body []byte) (string, any, error) {
	if jobKind(body) == KindBench {
		spec, err := ParseBenchJob(ctx, bytes.NewReader(body), s.db)
		return KindBench, spec, err
	}
	spec, err := ParseJob(bytes.NewReader(body))
	return KindSearch, spec, err
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	js, err := s.db.Jobs(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(js))
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.db.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// cancelJob cancels a queued job, or stops a running one as Ctrl-C stops
// a search (its trial is marked interrupted; the study can be resumed).
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.db.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	switch {
	case j.State.Finished():
		writeError(w, http.StatusConflict, "finished", fmt.Sprintf("job %s is %s", j.ID, j.State))
		return
	case j.State == store.JobQueued:
		j.State, j.Ended = store.JobCancelled, time.Now().UTC()
		if err := s.db.UpdateJob(r.Context(), j); err != nil {
			s.writeErr(w, err)
			return
		}
		s.hub.publish(Event{Job: j.ID, State: j.State})
	default:
		if cancel := s.cancels[j.ID]; cancel != nil {
			cancel() // the worker records the state
		}
	}
	s.refreshQueue(r.Context())
	writeJSON(w, http.StatusAccepted, j)
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
