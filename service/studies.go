package service

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func (s *Server) listStudies(w http.ResponseWriter, r *http.Request) {
	all, err := s.st.Studies(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(all))
}

func (s *Server) getStudy(w http.ResponseWriter, r *http.Request) {
	st, err := s.st.Study(r.Context(), r.PathValue("id"))
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
}

func (s *Server) studyTrials(w http.ResponseWriter, r *http.Request) {
	st, err := s.st.Study(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	ts, err := s.st.Trials(r.Context(), st.ID, store.TrialFilter{})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	m := tuner.StudyMetrics(st)
	rows := make([]trialRow, len(ts))
	for i, t := range ts {
		rows[i] = trialRow{ID: t.ID, Seq: t.Seq, State: t.State, ConfigID: t.ConfigID, Repeat: t.Repeat, Started: t.Started, Ended: t.Ended,
			Verdict: tuner.FromStore(t).Verdict(), Flags: t.Config.Flags()}
		if v, ok := m.Vector(t.Result); ok {
			rows[i].Throughput, rows[i].Latency, rows[i].VRAM = &v[0], &v[1], &v[2]
		}
	}
	writeJSON(w, http.StatusOK, rows)
}

func (s *Server) getTrial(w http.ResponseWriter, r *http.Request) {
	t, err := s.st.Trial(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// studyView is a study's trials judged as `tuner pareto` and `tuner
// recommend` judge them: its SLO (or ?slo=), k (?k=, default 1).
type studyView struct {
	study   store.Study
	trials  []tuner.Trial
	slo     trial.SLO
	k       float64
	metrics tuner.Metrics
	cands   []tuner.Candidate
}

func (s *Server) view(r *http.Request) (*studyView, error) {
	st, err := s.st.Study(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	v := &studyView{study: st, slo: st.SLO(), k: tuner.DefaultConfig().MADK, metrics: tuner.StudyMetrics(st)}
	if q := r.URL.Query().Get("slo"); q != "" {
		if v.slo, err = trial.ParseSLO(q); err != nil {
			return nil, tuner.Usagef("--slo: %v", err)
		}
	}
	if q := r.URL.Query().Get("k"); q != "" {
		if v.k, err = strconv.ParseFloat(q, 64); err != nil || v.k < 0 || math.IsNaN(v.k) || math.IsInf(v.k, 0) {
			return nil, tuner.Usagef("--k %q: want a number >= 0", q)
		}
	}
	ts, err := s.st.Trials(r.Context(), st.ID, store.TrialFilter{})
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		v.trials = append(v.trials, tuner.FromStore(t))
	}
	v.cands = tuner.Aggregate(v.trials, v.slo, v.metrics, v.k)
	return v, nil
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

func (v *studyView) front() frontDoc {
	d := frontDoc{Study: v.study.ID, SLO: v.slo.String(), Metrics: v.metrics, Front: []tuner.Candidate{}, DefaultConfigID: tuner.DefaultConfigIDOf(v.study, v.trials)}
	for _, i := range tuner.Front(v.cands, v.metrics) {
		d.Front = append(d.Front, v.cands[i])
	}
	return d
}

func (s *Server) studyFront(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v.front())
}

// studyFrontHTML is the interactive front chart of `tuner pareto --html`
// for the study (the page embeds it).
func (s *Server) studyFrontHTML(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	f := v.front()
	pts, o := tuner.FrontChartData(v.study, f.Front, v.cands, v.slo, v.metrics, f.DefaultConfigID)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := tuner.WriteFrontHTML(w, pts, o); err != nil {
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
	prefer, err := tuner.ParsePrefer(orDefault(q.Get("prefer"), string(tuner.PreferThroughput)))
	if err != nil {
		s.writeErr(w, tuner.Usagef("--prefer: %v", err))
		return
	}
	format := orDefault(q.Get("format"), "json")
	doc, err := tuner.BuildRecommendation(tuner.RecommendInput{
		Studies: []store.Study{v.study}, Newest: v.study, Trials: v.trials, Cands: v.cands,
		SLO: v.slo, Metrics: v.metrics, Prefer: prefer,
	})
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

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
