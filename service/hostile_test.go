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
