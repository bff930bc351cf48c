package service

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// scripted serves the conformance suite's studies: three studies of 30
// trials with every end state, the first with one trial still running.
func scripted(t *testing.T) (*env, []store.Study) {
	t.Helper()
	e := newEnv(t, "", Config{}, false)
	return e, storetest.Script(t, e.st, 7, 30)
}

func getJSON(t *testing.T, e *env, path string, v any) {
	t.Helper()
	code, out := e.do(t, "GET", path, "", "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, out)
	}
}

func TestTrialsPagedSortedFiltered(t *testing.T) {
	e, studies := scripted(t)
	st := studies[0]
	all, err := e.st.Trials(context.Background(), st.ID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	base := "/api/v1/studies/" + st.ID + "/trials"
	var p trialPage
	getJSON(t, e, base, &p)
	if p.Total != len(all) || len(p.Trials) != len(all) || p.Limit != DefaultTrialLimit || p.Sort != "seq" {
		t.Fatalf("default page: total %d, %d rows, limit %d, sort %s; want %d trials", p.Total, len(p.Trials), p.Limit, p.Sort, len(all))
	}
	// Pages cut the sorted list without gaps or overlaps.
	var paged []string
	for off := 0; off < len(all); off += 7 {
		getJSON(t, e, base+"?limit=7&offset="+strconv.Itoa(off), &p)
		for _, r := range p.Trials {
			paged = append(paged, r.ID)
		}
	}
	if want := ids(all); !slices.Equal(paged, want) {
		t.Fatalf("paged %v, want %v", paged, want)
	}
	getJSON(t, e, base+"?offset=1000", &p)
	if len(p.Trials) != 0 || p.Total != len(all) {
		t.Fatalf("past the end: %+v", p)
	}
	// Sorted by throughput, highest first, trials without one last.
	getJSON(t, e, base+"?sort=throughput&order=desc&limit=1000", &p)
	seenNil := false
	for i, r := range p.Trials {
		if r.Throughput == nil {
			seenNil = true
			continue
		}
		if seenNil || (i > 0 && *p.Trials[i-1].Throughput < *r.Throughput) {
			t.Fatalf("row %d (%s) out of order", i, r.ID)
		}
	}
	if !seenNil {
		t.Fatal("the script has failed trials: some rows should lack a throughput")
	}
	// The CLI's --state filter, and a config.
	getJSON(t, e, base+"?state=failed", &p)
	for _, r := range p.Trials {
		if r.State != store.StateFailed {
			t.Fatalf("state filter let %s (%s) through", r.ID, r.State)
		}
	}
	if p.Total == 0 {
		t.Fatal("no failed trials")
	}
	getJSON(t, e, base+"?config="+all[3].ConfigID, &p)
	if p.Total == 0 || p.Trials[0].ConfigID != all[3].ConfigID {
		t.Fatalf("config filter: %+v", p)
	}

	for _, tt := range []struct{ query, want string }{
		{"state=done", `--state "done": want running, ok, unstable, failed or interrupted`},
		{"sort=flags", `sort "flags": want one of config_id, duration_s,`},
		{"order=up", `order "up": want asc or desc`},
		{"limit=0", `limit "0": want an integer from 1 to 1000`},
		{"offset=-1", `offset "-1"`},
	} {
		code, out := e.do(t, "GET", base+"?"+tt.query, "", "")
		if code != http.StatusBadRequest || !strings.Contains(errMessage(out), tt.want) {
			t.Errorf("?%s: %d %s; want 400 with %q", tt.query, code, out, tt.want)
		}
	}
}

// errMessage is the message of an error body ("" if it is none).
func errMessage(body string) string {
	var ae apiError
	_ = json.Unmarshal([]byte(body), &ae)
	return ae.Message
}

func ids(ts []store.Trial) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// TestCacheFollowsTheStore: trials written after a study was served (by a
// search in this process or another) show in its trials, front and
// recommendation, which always equal a judgement of the full records.
func TestCacheFollowsTheStore(t *testing.T) {
	e, studies := scripted(t)
	ctx := context.Background()
	st := studies[0]
	check := func(when string) {
		t.Helper()
		all, err := e.st.Trials(ctx, st.ID, store.TrialFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var p trialPage
		getJSON(t, e, "/api/v1/studies/"+st.ID+"/trials?limit=1000", &p)
		if p.Total != len(all) {
			t.Fatalf("%s: %d trials served, %d stored", when, p.Total, len(all))
		}
		for i, r := range p.Trials {
			if r.ID != all[i].ID || r.State != all[i].State {
				t.Fatalf("%s: row %d is %s %s, stored %s %s", when, i, r.ID, r.State, all[i].ID, all[i].State)
			}
		}
		m := tuner.StudyMetrics(st)
		cands := tuner.Aggregate(all, st.SLO(), m, tuner.DefaultConfig().MADK)
		want := []tuner.Candidate{}
		for _, i := range tuner.Front(cands, m) {
			want = append(want, cands[i])
		}
		// Best conservative throughput first, as `tuner pareto` lists it.
		slices.SortStableFunc(want, func(a, b tuner.Candidate) int { return cmp.Compare(b.Score, a.Score) })
		var f frontDoc
		getJSON(t, e, "/api/v1/studies/"+st.ID+"/front", &f)
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(f.Front)
		if !bytes.Equal(wb, gb) {
			t.Fatalf("%s: front\n%s\nwant\n%s", when, gb, wb)
		}
		// Every candidate, judged again only for the configs that changed.
		snap, err := e.srv.cache.get(ctx, e.srv.db, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		wb, _ = json.Marshal(cands)
		gb, _ = json.Marshal(snap.judge(nil, -1).cands)
		if !bytes.Equal(wb, gb) {
			t.Fatalf("%s: candidates\n%s\nwant\n%s", when, gb, wb)
		}
	}
	check("first read")
	check("unchanged")
	// The script left a trial running: finish it, then start and finish more.
	running, err := e.st.Trials(ctx, st.ID, store.TrialFilter{States: []store.State{store.StateRunning}})
	if err != nil || len(running) != 1 {
		t.Fatalf("running trials: %v %v", running, err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	if _, err := e.st.FinishTrial(ctx, running[0].ID, storetest.Result(r, running[0].Config)); err != nil {
		t.Fatal(err)
	}
	check("running trial finished")
	for i := range 6 {
		cfg := storetest.Config(r)
		if i%2 == 1 { // a config measured before: its candidate changes
			cfg = running[0].Config
		}
		tr, err := e.st.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check("trial begun")
		res := storetest.Result(r, cfg)
		res.Status, res.Failure = trial.StatusOK, ""
		if res.Metrics() == nil {
			continue
		}
		res.Levels[0].Metrics.OutputThroughput = 1e6 + float64(i) // best throughput: joins the front
		if _, err := e.st.FinishTrial(ctx, tr.ID, res); err != nil {
			t.Fatal(err)
		}
		check("trial finished")
	}
}

func TestStudyListFiltersAreTheCLIs(t *testing.T) {
	e, studies := scripted(t)
	l4, err := e.st.EnsureStudy(context.Background(), storetest.Key("qwen-7b", "L4-24GB", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query string
		want  []string // newest first
	}{
		{"", []string{l4.ID, studies[2].ID, studies[1].ID, studies[0].ID}},
		{"model=llama-8b", []string{studies[1].ID, studies[0].ID}},
		{"model=llama-8b&workload=rag", []string{studies[1].ID}},
		{"gpu=L4", []string{l4.ID}}, // an alias of L4-24GB, as for the CLI; the script's key "L4" is no catalog name
		{"gpu=H100", nil},           // H100-80GB
		{"engine=vllm", nil},
	}
	for _, tt := range tests {
		var got []store.Study
		getJSON(t, e, "/api/v1/studies?"+tt.query, &got)
		var gotIDs []string
		for _, s := range got {
			gotIDs = append(gotIDs, s.ID)
		}
		m, _ := url.ParseQuery(tt.query)
		core, err := tuner.MatchStudies(context.Background(), e.st, tuner.StudyFilter{Model: m.Get("model"), GPU: m.Get("gpu"), Workload: m.Get("workload"), Engine: m.Get("engine")})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotIDs, tt.want) || len(core) != len(got) {
			t.Errorf("?%s: %v (core %d); want %v", tt.query, gotIDs, len(core), tt.want)
		}
	}
}

func TestSpaceIsTunerSpace(t *testing.T) {
	e := newEnv(t, "", Config{}, false)
	var got map[string]any
	getJSON(t, e, "/api/v1/space?model=Llama-3.1-70B&gpu=H100&gpus=4&max_model_len=8192", &got)
	ts := tuner.TargetSpec{Model: "Llama-3.1-70B", GPU: "H100", GPUs: 4}
	n := 8192
	ts.MaxModelLen = &n
	rep, err := tuner.SpaceQuery{Target: ts}.Space(context.Background(), e.st)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(rep)
	var wantAny map[string]any
	_ = json.Unmarshal(want, &wantAny)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(wantAny)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("space\n%s\nwant\n%s", gb, wb)
	}
	if p, _ := got["pruning"].(map[string]any); p == nil || got["params"] == nil {
		t.Fatalf("no params or pruning in %s", gb)
	}
	for _, tt := range []struct{ query, want string }{
		{"model=Llama-3.1-70B", "--model and --gpu go together"},
		{"model=Llama-3.1-70B&gpu=H100&gpus=x", `--gpus "x": want an integer`},
		{"model=Llama-3.1-70B&gpu=H100&max_model_len=10", "--max-model-len 10 outside"},
		{"model=Llama-3.1-70B&gpu=H100&slo=ttft<<3", "--slo:"},
		{"model=Llama-3.1-70B&gpu=H100&profiles=/etc/x.yaml", "profiles names a file of the server"},
	} {
		code, out := e.do(t, "GET", "/api/v1/space?"+tt.query, "", "")
		if code != http.StatusBadRequest || !strings.Contains(errMessage(out), tt.want) {
			t.Errorf("?%s: %d %s; want 400 with %q", tt.query, code, out, tt.want)
		}
	}
}

func TestTrialRawDownload(t *testing.T) {
	e := newEnv(t, "", Config{}, false)
	ctx := context.Background()
	st, err := e.st.EnsureStudy(ctx, storetest.Key("llama-8b", "H100", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "t1"+rawSuffix)
	h := trial.RawHeader{ConfigID: "abc", Workload: "chat", Levels: []trial.RawLevel{{Concurrency: 4, Records: []trial.Record{
		{Index: 0, PromptLen: 10, OutputLen: 3, Start: time.Millisecond, Chunks: []time.Duration{2 * time.Millisecond, 3 * time.Millisecond}, End: 4 * time.Millisecond},
		{Index: 1, PromptLen: 12, OutputLen: 0, Start: 2 * time.Millisecond, End: 5 * time.Millisecond, Err: "503"},
	}}}}
	if err := trial.WriteRaw(rawPath, h); err != nil {
		t.Fatal(err)
	}
	notRaw := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(notRaw, []byte("not for download"), 0o600); err != nil {
		t.Fatal(err)
	}
	fakeRaw := filepath.Join(dir, "fake"+rawSuffix)
	if err := os.WriteFile(fakeRaw, []byte("plain text"), 0o600); err != nil {
		t.Fatal(err)
	}
	trialWith := func(path string) string {
		cfg := storetest.Config(r)
		tr, err := e.st.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res := storetest.Result(r, cfg)
		res.RawPath = path
		if _, err := e.st.FinishTrial(ctx, tr.ID, res); err != nil {
			t.Fatal(err)
		}
		return tr.ID
	}
	withRaw, noRaw := trialWith(rawPath), trialWith("")
	secret, fake, gone := trialWith(notRaw), trialWith(fakeRaw), trialWith(filepath.Join(dir, "gone"+rawSuffix))

	code, out := e.do(t, "GET", "/api/v1/trials/"+withRaw+"/raw", "", "")
	file, _ := os.ReadFile(rawPath)
	if code != 200 || out != string(file) {
		t.Fatalf("raw: %d, %d bytes; want the file's %d", code, len(out), len(file))
	}
	back, err := trial.DecodeRaw(strings.NewReader(out))
	if err != nil || len(back.Levels) != 1 || len(back.Levels[0].Records) != 2 || back.Levels[0].Records[1].Err != "503" {
		t.Fatalf("downloaded raw data: %+v %v", back, err)
	}
	code, out = e.do(t, "GET", "/api/v1/trials/"+withRaw+"/raw?format=jsonl", "", "")
	zr, _ := gzip.NewReader(bytes.NewReader(file))
	plain, _ := io.ReadAll(zr)
	if code != 200 || out != string(plain) || strings.Count(out, "\n") != 3 {
		t.Fatalf("raw jsonl: %d %q", code, out)
	}
	for _, tt := range []struct{ id, query, want string }{
		{noRaw, "", "has no raw data"},
		{secret, "", "not a raw data file name"},
		{fake, "", "raw data file:"},
		{gone, "", "raw data file is gone"},
		{st.ID + "-99", "", "not found"},
	} {
		code, out := e.do(t, "GET", "/api/v1/trials/"+tt.id+"/raw"+tt.query, "", "")
		if code != http.StatusNotFound || !strings.Contains(errMessage(out), tt.want) || strings.Contains(out, "not for download") {
			t.Errorf("raw of %s: %d %s; want 404 with %q", tt.id, code, out, tt.want)
		}
	}
	if code, out := e.do(t, "GET", "/api/v1/trials/"+withRaw+"/raw?format=csv", "", ""); code != http.StatusBadRequest {
		t.Errorf("format csv: %d %s", code, out)
	}
}

func FuzzTrialQuery(f *testing.F) {
	f.Add("sort=throughput&order=desc&limit=5&offset=2")
	f.Add("state=ok&config=abc&limit=1000")
	f.Add("offset=2147483647&limit=1000")
	f.Add("limit=%zz")
	thr := 10.0
	rows := []trialRow{{ID: "a", Seq: 1, State: store.StateOK, Throughput: &thr}, {ID: "b", Seq: 2, State: store.StateFailed}}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseTrialQuery(v)
		if err != nil {
			var ue tuner.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not a usage error", err)
			}
			return
		}
		p := q.page(rows, tuner.DefaultMetrics())
		if len(p.Trials) > q.limit || p.Total > len(rows) {
			t.Fatalf("page %+v of %d rows, limit %d", p, len(rows), q.limit)
		}
	})
}

func FuzzSpaceQuery(f *testing.F) {
	f.Add("model=Llama-3.1-8B&gpu=H100&gpus=2&max_model_len=4096&no_prune=true")
	f.Add("gpus=-1&no_prune=maybe")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if _, err := parseSpaceQuery(v); err != nil {
			var ue tuner.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not a usage error", err)
			}
		}
	})
}
