package trial

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFinishLevel: how a level's records become a MeasuredLevel and the
// error that ends the measurement, on the live engine's accounting
// (UnhealthyErrorRate, Judge) and the virtual clock's (neither).
func TestFinishLevel(t *testing.T) {
	ms := time.Millisecond
	closed := Workload{Arrival: Arrival{Kind: "closed", Concurrency: 8}}
	open := func(rate float64) Workload { return Workload{Arrival: Arrival{Kind: "poisson", Rate: rate}} }
	// 2 slots x 90 ms: 22.2 req/s.
	queue := func(rate float64) []Record { return queueModel(2, 8, rate, 60*ms, 10*ms, 0, 4, 4, 120) }
	// fail fails every k-th request with msg (warm-up included).
	fail := func(msg string, k int) []Record {
		recs := queue(11)
		for i := 0; i < len(recs); i += k {
			recs[i].Err, recs[i].Chunks = msg, nil
		}
		return recs
	}
	failMost := func() []Record { // 2 of 3
		recs := queue(11)
		for i := range recs {
			if i%3 != 0 {
				recs[i].Err, recs[i].Chunks = "503 Service Unavailable", nil
			}
		}
		return recs
	}
	warmupOnly := func() []Record { return queue(11)[:4] }
	errJudge := errors.New("server gone")
	live := LevelEnd{UnhealthyErrorRate: 0.5}
	cases := []struct {
		name       string
		recs       []Record
		end        LevelEnd
		judge      error // what Judge says (nil: go on)
		wantJudged bool
		overloaded bool
		unstable   string // a prefix of the stability's reason, the level unstable
		err        error  // errors.Is
		errText    string // in the error's text
	}{
		{name: "closed loop", recs: queue(0), end: LevelEnd{Load: closed}},
		// The same records offered open loop at twice the capacity: only
		// an open loop is judged for overload.
		{name: "closed loop never overloaded", recs: queue(44), end: LevelEnd{Load: closed}},
		{name: "open loop", recs: queue(11), end: LevelEnd{Load: open(11)}},
		{name: "open loop overloaded", recs: queue(44), end: LevelEnd{Load: open(44)}, overloaded: true, unstable: "overloaded: completes"},
		{name: "throttled", recs: queue(0), end: LevelEnd{Load: closed, Throttled: true}, unstable: ""},
		{name: "a quarter failed, live", recs: fail("500 Internal Server Error: boom", 4), end: live},
		{name: "most failed, judged healthy", recs: failMost(), end: live, wantJudged: true},
		{name: "most failed, judged", recs: failMost(), end: live, judge: errJudge, wantJudged: true, err: errJudge},
		{name: "most failed, virtual", recs: failMost(), end: LevelEnd{Index: 3}},
		{name: "all failed, live", recs: fail("500 Internal Server Error: boom", 1), end: live, judge: nil, wantJudged: true,
			err: ErrAllFailed, errText: "120 of 120, first: 500 Internal Server Error: boom"},
		{name: "all failed, judged", recs: fail("500 Internal Server Error: boom", 1), end: live, judge: errJudge, wantJudged: true, err: errJudge},
		{name: "all failed, virtual", recs: fail("500 Internal Server Error: boom", 1), end: LevelEnd{Index: 3},
			err: ErrAllFailed, errText: "120 of 120"},
		{name: "nothing measured, live", recs: warmupOnly(), end: live},
		{name: "nothing measured, virtual", recs: warmupOnly(), end: LevelEnd{Index: 3}, err: ErrAllFailed, errText: "failed: level 3"},
		{name: "context length", recs: fail("400 Bad Request: This model's maximum context length is 2048 tokens", 4), end: live,
			err: ErrContextLength, errText: "31 of 124 requests rejected as longer than max_model_len"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.end
			if e.Load.Arrival.Kind == "" {
				e.Load = open(11)
			}
			e.Stability, e.ElapsedS = DefaultStabilityConfig(), 12.5
			judged := false
			if e.UnhealthyErrorRate > 0 {
				e.Judge = func(_ context.Context, recs []Record, m *Metrics) error {
					judged = true
					if m.ErrorRate <= e.UnhealthyErrorRate || len(recs) != len(tc.recs) {
						t.Errorf("judged a level failing %.2f of its requests (%d records)", m.ErrorRate, len(recs))
					}
					return tc.judge
				}
			}
			// What FinishLevel is made of, on a copy of the records.
			want := slices.Clone(tc.recs)
			sc := e.Stability
			if e.Load.Arrival.Closed() {
				sc.Concurrency = e.Load.Arrival.Concurrency
			}
			wm, wa := SummarizeLevel(want, sc, e.SLO)
			if !e.Load.Arrival.Closed() {
				MarkOverload(want, &wm)
			}

			l, err := FinishLevel(context.Background(), tc.recs, e)
			if l == nil {
				t.Fatalf("no level (err %v)", err)
			}
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("err = %v, want %v", err, tc.err)
			case err != nil && !strings.Contains(err.Error(), tc.errText):
				t.Errorf("err %q does not say %q", err, tc.errText)
			}
			if judged != tc.wantJudged {
				t.Errorf("judged %v, want %v", judged, tc.wantJudged)
			}
			if l.Metrics.OutputThroughput != wm.OutputThroughput || l.Metrics.Completed != wm.Completed ||
				!slices.Equal(l.WindowThroughput, wa.WindowThroughput) || !reflect.DeepEqual(l.Records, want) {
				t.Errorf("metrics %.1f tok/s, %d completed, windows %v; SummarizeLevel: %.1f, %d, %v",
					l.Metrics.OutputThroughput, l.Metrics.Completed, l.WindowThroughput, wm.OutputThroughput, wm.Completed, wa.WindowThroughput)
			}
			if l.Metrics.Overloaded != tc.overloaded {
				t.Errorf("overloaded %v, want %v (%s)", l.Metrics.Overloaded, tc.overloaded, l.Metrics.OverloadText())
			}
			if e.Load.Arrival.Closed() {
				if l.Concurrency != 8 || l.Rate != 0 {
					t.Errorf("closed loop at concurrency %d, rate %v", l.Concurrency, l.Rate)
				}
			} else if l.Rate != e.Load.Arrival.Rate || l.Concurrency != 0 {
				t.Errorf("open loop at rate %v, concurrency %d", l.Rate, l.Concurrency)
			}
			if l.ElapsedS != 12.5 || l.Throttled != e.Throttled || l.Stability.Throttled != e.Throttled {
				t.Errorf("elapsed %v, throttled %v/%v", l.ElapsedS, l.Throttled, l.Stability.Throttled)
			}
			unstable := tc.overloaded || e.Throttled
			if unstable && (l.Stability.Stable || !strings.HasPrefix(l.Stability.Reason, tc.unstable)) {
				t.Errorf("stability %+v, want unstable, reason %q...", l.Stability, tc.unstable)
			}
			if !unstable && l.Stability != wa.Stability {
				t.Errorf("stability %+v, want the analysis' %+v", l.Stability, wa.Stability)
			}
			if met, viol := e.SLO.Check(&l.Metrics); l.SLOMet != met || !slices.Equal(l.Violations, viol) {
				t.Errorf("SLO met %v %v, Check says %v %v", l.SLOMet, l.Violations, met, viol)
			}
		})
	}
}

// TestFinishLevelEarlyStop: a level stopped early keeps the verdict the
// stop was decided on, with the final warm-up cut, and says so.
func TestFinishLevelEarlyStop(t *testing.T) {
	recs := queueModel(2, 8, 0, 60*time.Millisecond, 10*time.Millisecond, 0, 4, 4, 120)
	early := Analysis{Stability: Stability{Stable: true, Windows: 5, CIHalfWidth: 0.031, Reason: "steady"}}
	sc := DefaultStabilityConfig()
	sc.Concurrency = 8
	_, a := SummarizeLevel(slices.Clone(recs), sc, nil)
	l, err := FinishLevel(context.Background(), recs, LevelEnd{Load: Workload{Arrival: Arrival{Kind: "closed", Concurrency: 8}},
		Stability: DefaultStabilityConfig(), EarlyStop: &early, Extended: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := l.Stability
	if !st.EarlyStopped || st.Extended != 1 || st.Windows != 5 || !st.Stable || st.WarmupS != a.WarmupS ||
		st.Reason != "early stop at throughput CI half-width 3.1%; steady" {
		t.Errorf("stability %+v", st)
	}
}

// TestLevelConfigDefaults: an unset knob (<= 0, zero Stability) takes
// its default, a set one is kept, and the capacity mode is the knobs'.
func TestLevelConfigDefaults(t *testing.T) {
	d := DefaultLevelConfig()
	sc := DefaultStabilityConfig()
	sc.CITarget = 0.01
	cases := []struct {
		name string
		in   LevelConfig
		want LevelConfig
	}{
		{"zero", LevelConfig{}, d},
		{"negative", LevelConfig{MaxRequests: -1, MaxRate: -5, UnhealthyErrorRate: -0.1}, d},
		{"set", LevelConfig{Stability: sc, MaxRequests: 7, MaxConcurrency: 9, MaxRate: 2.5, CapacityLevels: 3,
			CapacityTolerance: 0.2, CapacityRounds: 1, UnhealthyErrorRate: 0.9},
			LevelConfig{Stability: sc, MaxRequests: 7, MaxConcurrency: 9, MaxRate: 2.5, CapacityLevels: 3,
				CapacityTolerance: 0.2, CapacityRounds: 1, UnhealthyErrorRate: 0.9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			c.SetDefaults()
			if !reflect.DeepEqual(c, tc.want) {
				t.Errorf("SetDefaults: %+v, want %+v", c, tc.want)
			}
			want := CapacityConfig{MaxConcurrency: tc.want.MaxConcurrency, MaxRate: tc.want.MaxRate, Levels: tc.want.CapacityLevels,
				Tolerance: tc.want.CapacityTolerance, Rounds: tc.want.CapacityRounds}
			if got := c.Capacity(); got != want {
				t.Errorf("Capacity: %+v, want %+v", got, want)
			}
		})
	}
}
