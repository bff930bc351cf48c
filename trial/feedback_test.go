package trial

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// thresholdMeasure is a server whose TTFT p95 is v x 10 ms: a window
// meets ttft_p95 <= 10 x limit ms exactly when v <= limit.
func thresholdMeasure(limit float64, calls *[]float64) FeedbackMeasure {
	return func(v float64, lw Workload) (*Metrics, bool, float64, error) {
		*calls = append(*calls, v)
		if lw.Arrival.Rate != v {
			return nil, false, 0, errors.New("window workload not at its rate")
		}
		m := &Metrics{RequestThroughput: math.Min(v, limit)}
		m.TTFT.P95 = 10 * v
		return m, v <= limit, 30, nil
	}
}

func feedbackWorkload(rate float64) Workload {
	return Workload{Name: "fb", Arrival: Arrival{Kind: "poisson", Rate: rate}, NumRequests: 100, Feedback: true,
		SLO: SLO{{Metric: "error_rate", Op: "<=", Limit: 0.05}, {Metric: "ttft_p95", Op: "<=", Limit: 500}}}
}

// TestHoldSLOAgreesWithBisection: against a sharp limit, the controller's
// sustained load is within 5% of capacity mode's bisection (at 1%), from
// starting rates above and below the limit (bisection never tries below 1
// req/s, so the limits are above it).
func TestHoldSLOAgreesWithBisection(t *testing.T) {
	for _, c := range []struct{ start, limit float64 }{
		{1, 1.3}, {1, 3.99}, {1, 7.9}, {1, 17.77}, {1, 63.2}, {1, 99}, {10, 1.7}, {50, 23.4}, {2, 2}, {0, 5.5},
	} {
		var calls []float64
		fb, err := HoldSLO(feedbackWorkload(c.start), FeedbackConfig{}, thresholdMeasure(c.limit, &calls))
		if err != nil {
			t.Fatal(err)
		}
		var bcalls []float64
		bis, _ := SearchCapacity(math.Max(1, c.start), 10000, false, 30, 0.01, func(v float64) (bool, error) {
			_, met, _, _ := thresholdMeasure(c.limit, &bcalls)(v, AtLoad(feedbackWorkload(v), v))
			return met, nil
		})
		d := (fb.Sustained - bis) / bis
		t.Logf("limit %v from %v: feedback %.3f (windows %v), bisection %.3f: %+.1f%%", c.limit, c.start, fb.Sustained, calls, bis, 100*d)
		if math.Abs(d) > 0.05 || !fb.Bounded || fb.Sustained > c.limit {
			t.Errorf("limit %v: feedback %.3f, bisection %.3f (%+.1f%%), bounded %v", c.limit, fb.Sustained, bis, 100*d, fb.Bounded)
		}
		if len(fb.Windows) != DefaultFeedbackConfig().Windows || fb.Metric != "ttft_p95" || fb.Target != 500 {
			t.Errorf("%d windows, metric %s <= %v", len(fb.Windows), fb.Metric, fb.Target)
		}
		for i, w := range fb.Windows {
			if w.StartS != 30*float64(i) || w.Tail != 10*w.Rate || w.Met != (w.Rate <= c.limit) {
				t.Errorf("window %d: %+v", i, w)
			}
		}
		if p := fb.Primary(); p < 0 || !fb.Windows[p].Met {
			t.Errorf("primary %d", p)
		}
	}
}

func TestHoldSLOEdges(t *testing.T) {
	// Never failing below the cap: the cap, not bounded.
	var calls []float64
	fb, err := HoldSLO(feedbackWorkload(4), FeedbackConfig{MaxRate: 50}, thresholdMeasure(1e9, &calls))
	if err != nil || fb.Sustained != 50 || fb.Bounded || len(calls) != 5 || !strings.Contains(fb.Summary(), "lower bound") {
		t.Errorf("uncapped: %+v %v, calls %v", fb, err, calls)
	}
	// Never passing: 0, no primary.
	calls = nil
	fb, err = HoldSLO(feedbackWorkload(4), FeedbackConfig{}, thresholdMeasure(0, &calls))
	if err != nil || fb.Sustained != 0 || fb.Bounded || fb.Primary() != -1 || !strings.Contains(fb.Summary(), "no window") {
		t.Errorf("never passing: %+v %v", fb, err)
	}
	// A failed window stops the controller with what it has.
	boom := errors.New("engine died")
	n := 0
	fb, err = HoldSLO(feedbackWorkload(4), FeedbackConfig{}, func(v float64, lw Workload) (*Metrics, bool, float64, error) {
		if n++; n == 3 {
			return nil, false, 0, boom
		}
		return &Metrics{}, true, 1, nil
	})
	if !errors.Is(err, boom) || len(fb.Windows) != 2 {
		t.Errorf("measure error: %v, %d windows", err, len(fb.Windows))
	}
	for _, w := range []Workload{
		{Name: "closed", Arrival: Arrival{Kind: "closed", Concurrency: 4}, SLO: SLO{{Metric: "ttft_p95", Op: "<=", Limit: 500}}},
		{Name: "throughput", Arrival: Arrival{Kind: "poisson", Rate: 1}, SLO: SLO{{Metric: "output_throughput", Op: ">=", Limit: 500}}},
		{Name: "none", Arrival: Arrival{Kind: "poisson", Rate: 1}},
	} {
		if _, err := HoldSLO(w, FeedbackConfig{}, thresholdMeasure(1, &calls)); err == nil {
			t.Errorf("%s: accepted", w.Name)
		}
	}
	rows := (&Feedback{Windows: []FeedbackWindow{{StartS: 1.25, Rate: 2.5, Achieved: 2.4, Tail: 321.04, Met: true, Phase: FeedbackProbe}}}).Rows()
	if strings.Join(rows[0], " ") != "0 1.2 probe 2.5 2.40 321.0 yes" || len(rows[0]) != len(FeedbackHeader) {
		t.Errorf("rows %q", rows)
	}
}

func TestParseWorkloadFeedback(t *testing.T) {
	base := "name: f\nprompt: {kind: fixed, value: 10}\noutput: {kind: fixed, value: 10}\nnum_requests: 10\n"
	w, err := ParseWorkload("f.yaml", []byte(base+"arrival: {kind: poisson, rate: 2}\nfeedback: true\nslo: ttft_p95<=500ms\n"))
	if err != nil || !w.Feedback {
		t.Fatalf("valid feedback workload: %+v %v", w, err)
	}
	if _, err := ParseWorkload("f.yaml", []byte(base+"arrival: {kind: poisson}\nfeedback: true\nslo: ttft_p99<=1s\n")); err != nil {
		t.Errorf("feedback without a starting rate: %v", err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"arrival: {kind: closed, concurrency: 4}\nfeedback: true\nslo: ttft_p95<=500ms\n", "open-loop"},
		{"arrival: {kind: poisson, rate: 2}\nfeedback: true\n", "latency bound"},
		{"arrival: {kind: poisson, rate: 2}\nfeedback: true\nslo: output_throughput>=10\n", "latency bound"},
		{"arrival: {kind: poisson, rate: 2}\nfeedback: true\ncapacity: true\nslo: ttft_p95<=500ms\n", "choose one"},
	} {
		_, err := ParseWorkload("f.yaml", []byte(base+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.yaml") {
			t.Errorf("%q: %v, want an error saying %q", c.yaml, err, c.want)
		}
	}
}
