package service

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/bounded/boundedtest"
)

// hostileBody is a benchmark job whose inline matrix is doc.
func hostileBody(doc []byte) string {
	m, _ := json.Marshal(string(doc))
	return fmt.Sprintf(`{"kind":"bench","engine":"sim-virtual","model":%q,"gpu":%q,"config":"default","matrix_yaml":%s}`, testModel, testGPU, m)
}

// Issue 29: each hostile document of the issue as a benchmark job's
// matrix_yaml, and a job body nested 32,000 deep, are refused with 400
// naming the field and the limit (or 413 when over the body limit), the
// server allocating under 64 MB for it.
func TestHostileBodiesRefused(t *testing.T) {
	e := newEnv(t, "", Config{}, false)
	hostile := boundedtest.Hostile()
	cases := []struct{ name, body, want string }{
		{"deep-32k matrix", hostileBody(hostile["deep-32k"]), "matrix_yaml:1: nesting depth over the limit of 64"},
		{"alias-bomb matrix", hostileBody(hostile["alias-bomb"]), "matrix_yaml:5: node count with aliases expanded over the limit of 20000"},
		{"deep-100k matrix", hostileBody(hostile["deep-100k"]), "request body over 65536 bytes"},
		{"string-50mb matrix", hostileBody(hostile["string-50mb"]), "request body over 65536 bytes"},
		{"deep-32k body", `{"model":` + string(hostile["deep-32k"]) + `}`, "job body:1: nesting depth over the limit of 64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			var out string
			n := boundedtest.Allocated(func() { code, out = e.do(t, "POST", "/api/v1/jobs", "", tc.body) })
			var ae apiError
			if code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge || json.Unmarshal([]byte(out), &ae) != nil || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("%d %s; want 400 or 413 with %q", code, out, tc.want)
			}
			// the request body itself is counted once by the client and
			// once by the server
			if n -= 2 * uint64(len(tc.body)); int64(n) > 64<<20 {
				t.Errorf("allocated %d MB to refuse it", n>>20)
			}
		})
	}
}

// BenchmarkRefuseHostileService is the time from a POST to its 400 (413
// over the size of a document, even where MaxBody is larger) for each
// hostile document as a benchmark job's matrix_yaml.
func BenchmarkRefuseHostileService(b *testing.B) {
	e := newEnv(b, "", Config{MaxBody: 64 << 20}, false)
	for name, doc := range boundedtest.Hostile() {
		body := hostileBody(doc)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest("POST", e.ts.URL+"/api/v1/jobs", strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestEntityTooLarge {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// A 500 says "internal error" with an incident ID, never the server's
// error text (which names its files: the database path).
func TestInternalErrorNamesNoPath(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir+"/tuner.db", Config{}, false)
	e.st.Close() // every read now fails inside the server
	code, out := e.do(t, "GET", "/api/v1/jobs", "", "")
	var ae apiError
	if code != http.StatusInternalServerError || json.Unmarshal([]byte(out), &ae) != nil {
		t.Fatalf("%d %s; want 500", code, out)
	}
	if !strings.HasPrefix(ae.Message, "internal error (incident ") || strings.Contains(out, dir) {
		t.Errorf("500 answer %q: want an incident ID and no server path", ae.Message)
	}
}

// Job sizes are bounded with a 400 naming the field and the limit.
func TestJobSizeBounded(t *testing.T) {
	e := newEnv(t, "", Config{}, false)
	job := func(extra string) string {
		return fmt.Sprintf(`{"model":%q,"gpu":%q,"engine":"sim-virtual"%s}`, testModel, testGPU, extra)
	}
	for _, tc := range []struct{ body, want string }{
		{job(`,"trials":1000000000`), "job body: trials 1000000000 over the limit of 1000"},
		{job(`,"requests":1000000000`), "job body: requests 1000000000 over the limit of 1000000"},
		{job(`,"repeats":1000`), "job body: repeats 1000 over the limit of 20"},
		{job(`,"budget":"100000h"`), "job body: budget 100000h0m0s over the limit of 168h0m0s"},
		{job(`,"trial_timeout":"1000h"`), "job body: trial_timeout 1000h0m0s over the limit of 24h0m0s"},
		{hostileBody([]byte("name: big\ncells:\n  - {name: a, prompt: {kind: fixed, value: 10}, output: {kind: fixed, value: 10}, arrival: {kind: closed, concurrency: 1}, num_requests: 100000000}\n")),
			"matrix_yaml:3: cells.a.num_requests: too many"},
	} {
		e.wantInvalidJob(t, tc.body, tc.want)
	}
}
