package trial

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
)

const tenantYAML = `name: two
prompt: {kind: uniform, min: 10, max: 100}
output: {kind: fixed, value: 8}
arrival: {kind: closed, concurrency: 4}
num_requests: 400
seed: 3
tenants:
  - {name: sql, weight: 3, path: /a/sql, rank: 32}
  - {name: chat, weight: 1}
`

func TestWorkloadTenants(t *testing.T) {
	w, err := ParseWorkload("w.yaml", []byte(tenantYAML))
	if err != nil {
		t.Fatal(err)
	}
	if w.MaxLoRARank() != 32 || w.Tenants[1].AdapterRank() != DefaultLoRARank || w.Tenants[1].AdapterPath() != "chat" {
		t.Errorf("tenants %+v", w.Tenants)
	}
	if got := strings.Join(w.LoRAArgs(), " "); got != "--enable-lora --lora-modules sql=/a/sql chat=chat" {
		t.Errorf("LoRA args %q", got)
	}
	// Weights pick the tenants; lengths and arrivals are those of the same
	// workload without tenants.
	plain := w
	plain.Tenants = nil
	reqs, base := w.Requests(), plain.Requests()
	n := map[string]int{}
	for i, r := range reqs {
		n[r.Tenant]++
		if r.PromptLen != base[i].PromptLen || r.OutputLen != base[i].OutputLen || r.At != base[i].At || base[i].Tenant != "" {
			t.Fatalf("request %d differs from the tenantless workload: %+v vs %+v", i, r, base[i])
		}
	}
	if n["sql"] < 260 || n["sql"] > 340 || n["sql"]+n["chat"] != 400 {
		t.Errorf("tenant counts %v, want about 300/100", n)
	}
	if plain.LoRAArgs() != nil || plain.MaxLoRARank() != 0 {
		t.Error("LoRA args without tenants")
	}
}

func TestWorkloadTenantErrors(t *testing.T) {
	head := "name: x\nprompt: {kind: fixed, value: 2}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n"
	tests := []struct{ tenants, field string }{
		{"tenants: [{weight: 1}]", "tenants[0].name"},
		{"tenants: [{name: 'a b', weight: 1}]", "tenants[0].name"},
		{"tenants: [{name: a, weight: 1}, {name: a, weight: 2}]", "tenants[1].name"},
		{"tenants: [{name: a, weight: 0}]", "tenants[0].weight"},
		{"tenants: [{name: a, weight: 1, rank: 1024}]", "tenants[0].rank"},
		{"tenants: [{name: a, weight: 1, r: 8}]", ""},
	}
	for _, tt := range tests {
		_, err := ParseWorkload("w.yaml", []byte(head+tt.tenants+"\n"))
		var fe *spaces.FileError
		if !errors.As(err, &fe) || tt.field != "" && fe.Field != tt.field || fe.Line != 6 {
			t.Errorf("%s: %v (field %q), want %s at line 6", tt.tenants, err, fieldOf(fe), tt.field)
		}
	}
}

func fieldOf(fe *spaces.FileError) string {
	if fe == nil {
		return ""
	}
	return fe.Field
}

// Per-tenant aggregates share the level's window, and fairness is the
// worst tenant's P95 over the best's.
func TestSummarizeTenants(t *testing.T) {
	var recs []Record
	for i := 0; i < 40; i++ {
		tn, lat := "fast", 100*time.Millisecond
		if i%2 == 1 {
			tn, lat = "slow", 300*time.Millisecond
		}
		start := time.Duration(i) * 50 * time.Millisecond
		recs = append(recs, Record{Index: i, PromptLen: 10, OutputLen: 2, Start: start, Tenant: tn,
			Chunks: []time.Duration{lat / 2, lat}, End: lat})
	}
	m := Summarize(recs, nil)
	if got := strings.Join(m.Tenants(), ","); got != "fast,slow" {
		t.Fatalf("tenants %q", got)
	}
	if m.ByTenant["fast"].Completed != 20 || m.ByTenant["slow"].Completed != 20 {
		t.Errorf("completed %d/%d", m.ByTenant["fast"].Completed, m.ByTenant["slow"].Completed)
	}
	f := m.Fairness
	if f == nil || f.Worst != "slow" || f.Best != "fast" || f.E2ELP95Ratio < 2.99 || f.E2ELP95Ratio > 3.01 || f.TTFTP95Ratio < 2.99 {
		t.Fatalf("fairness %+v", f)
	}
	if v, ok := m.Value("fairness_e2el_p95"); !ok || v != f.E2ELP95Ratio {
		t.Errorf("Value(fairness_e2el_p95) = %v, %v", v, ok)
	}
	sum := m.ByTenant["fast"].OutputThroughput + m.ByTenant["slow"].OutputThroughput
	if d := sum - m.OutputThroughput; d > 1e-6*m.OutputThroughput || d < -1e-6*m.OutputThroughput {
		t.Errorf("tenant throughputs %.3f do not add up to %.3f", sum, m.OutputThroughput)
	}
	// Without tenants: no breakdown, no fairness.
	for i := range recs {
		recs[i].Tenant = ""
	}
	m = Summarize(recs, nil)
	if m.ByTenant != nil || m.Fairness != nil {
		t.Errorf("tenantless: %v %v", m.ByTenant, m.Fairness)
	}
	if _, ok := m.Value("fairness_ttft_p95"); ok {
		t.Error("fairness without tenants")
	}
}

func TestRequestModelIsTenant(t *testing.T) {
	c := NewClient("http://127.0.0.1:1", "base", 0)
	if b := string(c.body(RequestSpec{PromptLen: 2, OutputLen: 1, Tenant: "sql"}, 0)); !strings.HasPrefix(b, `{"model":"sql",`) {
		t.Errorf("completions body %s", b)
	}
	if b := string(c.chatBody(RequestSpec{PromptLen: 2, OutputLen: 1}, 0)); !strings.HasPrefix(b, `{"model":"base",`) {
		t.Errorf("chat body %s", b)
	}
}
