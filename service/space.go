package service

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/vllm-tuner/tuner/tuner"
)

// parseSpaceQuery reads GET /api/v1/space's parameters, named as the
// flags of `tuner space` (model, gpu, gpus, max_model_len, engine_version,
// slo, latency, no_prune). Files of the server (--file, --profiles) are not
// settable over the API.
func parseSpaceQuery(v url.Values) (tuner.SpaceQuery, error) {
	q := tuner.SpaceQuery{
		Target:  tuner.TargetSpec{Model: v.Get("model"), GPU: v.Get("gpu"), GPUs: 1, EngineVersion: v.Get("engine_version")},
		SLO:     v.Get("slo"),
		Latency: v.Get("latency"),
	}
	if s := v.Get("gpus"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return q, tuner.Usagef("--gpus %q: want an integer", s)
		}
		q.Target.GPUs = n
	}
	if s := v.Get("max_model_len"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return q, tuner.Usagef("--max-model-len %q: want an integer", s)
		}
		q.Target.MaxModelLen = &n
	}
	if s := v.Get("no_prune"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, tuner.Usagef("--no-prune %q: want true or false", s)
		}
		q.NoPrune = b
	}
	for _, name := range []string{"file", "space", "profiles"} {
		if v.Has(name) {
			return q, tuner.Usagef("%s names a file of the server: not settable over the API", name)
		}
	}
	return q, nil
}

// space is `tuner space --json`: the effective space of a model on a GPU
// setup and the pruning a new search there would apply, from the history
// in the service's database.
func (s *Server) space(w http.ResponseWriter, r *http.Request) {
	q, err := parseSpaceQuery(r.URL.Query())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	rep, err := q.Space(r.Context(), s.db)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
