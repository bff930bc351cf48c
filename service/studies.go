package service

import (
	"cmp"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// listStudies lists the studies, newest first, with the filters of the
// CLI's --model, --gpu, --workload and --engine.
func (s *Server) listStudies(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all, err := tuner.MatchStudies(r.Context(), s.db, tuner.StudyFilter{Model: q.Get("model"), GPU: q.Get("gpu"), Workload: q.Get("workload"), Engine: q.Get("engine")})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(all))
}

func (s *Server) getStudy(w http.ResponseWriter, r *http.Request) {
	st, err := s.db.Study(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// trialRow is a stored trial without its full result (GET
// /api/v1/trials/{id} has it): its verdict, flags and objective values (the
// study's throughput and latency metrics, peak VRAM; absent when the trial
// has no measurement).
type trialRow struct {
	ID         string      `json:"id"`
	Seq        uint64      `json:"seq"`
	State      store.State `json:"state"`
	ConfigID   string      `json:"config_id"`
	Repeat     int         `json:"repeat"`
	Started    time.Time   `json:"started"`
	Ended      time.Time   `json:"ended,omitzero"`
	Verdict    string      `json:"verdict"`
	Flags      []string    `json:"flags"`
	Throughput *float64    `json:"throughput,omitempty"`
	Latency    *float64    `json:"latency,omitempty"`
	VRAM       *float64    `json:"vram_gib,omitempty"`
	DurationS  *float64    `json:"duration_s,omitempty"`
}

// trialPage is one page of a study's trials table.
type trialPage struct {
	Total   int           `json:"total"` // trials matching the filters
	Offset  int           `json:"offset"`
	Limit   int           `json:"limit"`
	Sort    string        `json:"sort"`
	Order   string        `json:"order"`
	Metrics tuner.Metrics `json:"metrics"`
	Trials  []trialRow    `json:"trials"`
}

func (s *Server) studyTrials(w http.ResponseWriter, r *http.Request) {
	q, err := parseTrialQuery(r.URL.Query())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	snap, err := s.cache.get(r.Context(), s.db, r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q.page(snap.rows, snap.metrics))
}

func (s *Server) getTrial(w http.ResponseWriter, r *http.Request) {
	t, err := s.db.Trial(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// The trial page shows its flags as vllm serve takes them.
	writeJSON(w, http.StatusOK, struct {
		store.Trial
		Flags []string `json:"flags"`
	}{t, t.Config.Flags()})
}

// studyView is a study's trials judged as `tuner pareto` and `tuner
// recommend` judge them: its SLO (or ?slo=), k (?k=, default 1).
type studyView struct {
	*studySnap
	*judgement
}

func (s *Server) view(r *http.Request) (studyView, error) {
	var slo trial.SLO
	k := -1.0
	if q := r.URL.Query().Get("slo"); q != "" {
		var err error
		if slo, err = trial.ParseSLO(q); err != nil {
			return studyView{}, tuner.Usagef("--slo: %v", err)
		}
	}
	if q := r.URL.Query().Get("k"); q != "" {
		var err error
		if k, err = strconv.ParseFloat(q, 64); err != nil || k < 0 || math.IsNaN(k) || math.IsInf(k, 0) {
			return studyView{}, tuner.Usagef("--k %q: want a number >= 0", q)
		}
	}
	snap, err := s.cache.get(r.Context(), s.db, r.PathValue("id"))
	if err != nil {
		return studyView{}, err
	}
	return studyView{snap, snap.judge(slo, k)}, nil
}

// frontDoc is the front of a study: its members (conservative values) and
// vLLM's default config.
type frontDoc struct {
	Study           string            `json:"study"`
	SLO             string            `json:"slo"`
	Metrics         tuner.Metrics     `json:"metrics"`
	Front           []tuner.Candidate `json:"front"`
	DefaultConfigID string            `json:"default_config_id,omitempty"`
}

func (v studyView) doc() frontDoc {
	return frontDoc{Study: v.study.ID, SLO: v.slo.String(), Metrics: v.metrics, Front: v.front.Front, DefaultConfigID: v.defaultID}
}

// frontChart is the study's front chart, as `tuner pareto` draws it.
func (v studyView) frontChart() chart.Figure {
	return chart.Front(v.front.Chart(tuner.ChartTitle(v.study.Key), v.slo, v.metrics))
}

func (s *Server) studyFront(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v.doc())
}

// studyFrontHTML is the interactive front chart of `tuner pareto --html`
// for the study (the page embeds it).
func (s *Server) studyFrontHTML(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	f := v.frontChart()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := chart.WriteHTML(w, f); err != nil {
		s.log.Error("front chart", "study", v.study.ID, "err", err)
	}
}

func (s *Server) recommend(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	q := r.URL.Query()
	prefer, err := tuner.ParsePrefer(cmp.Or(q.Get("prefer"), string(tuner.PreferThroughput)))
	if err != nil {
		s.writeErr(w, tuner.Usagef("--prefer: %v", err))
		return
	}
	format := cmp.Or(q.Get("format"), "json")
	doc, err := v.recommendation(prefer)
	if err != nil && doc.Closest == nil {
		s.writeErr(w, err)
		return
	}
	switch format {
	case "json":
		status := http.StatusOK
		if err != nil {
			status = http.StatusUnprocessableEntity // nothing meets the SLO: the closest is in the body
		}
		writeJSON(w, status, doc)
	case "flags", "command", "yaml":
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "no_feasible", err.Error())
			return
		}
		text, terr := doc.Format(format)
		if terr != nil {
			writeError(w, http.StatusUnprocessableEntity, "format", terr.Error())
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(text))
	default:
		writeError(w, http.StatusBadRequest, "invalid", "--format "+format+": want flags, command, yaml or json")
	}
}

// recommendation is the view's recommendation for prefer, built once per
// judgement (a judgement is kept with its snapshot for the study's own SLO
// and k: building it takes milliseconds on a study of 10,000 configs).
func (v studyView) recommendation(prefer tuner.Prefer) (tuner.Recommendation, error) {
	type built struct {
		doc tuner.Recommendation
		err error
	}
	if b, ok := v.recs.Load(prefer); ok {
		return b.(built).doc, b.(built).err
	}
	doc, err := tuner.BuildRecommendation(tuner.RecommendInput{
		Studies: []store.Study{v.study}, Newest: v.study, Trials: v.trials, Cands: v.cands,
		SLO: v.slo, Metrics: v.metrics, Prefer: prefer, DefaultConfigID: v.defaultID,
	})
	v.recs.Store(prefer, built{doc, err})
	return doc, err
}
