package store

import (
	"testing"
	"time"
)

// TestHistoryOrder: History and HistoryTrials order by start time, then
// study, then sequence, the same for summaries and trials.
func TestHistoryOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type key struct {
		at    time.Time
		study string
		seq   uint64
	}
	cases := []struct {
		name string
		a, b key
		want int
	}{
		{"earlier first", key{t0, "s2", 9}, key{t0.Add(time.Second), "s1", 1}, -1},
		{"then study", key{t0, "s2", 1}, key{t0, "s10", 9}, 1},
		{"then sequence", key{t0, "s1", 2}, key{t0, "s1", 10}, -1},
		{"same", key{t0, "s1", 2}, key{t0, "s1", 2}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa := Summary{Started: tc.a.at, StudyID: tc.a.study, Seq: tc.a.seq}
			sb := Summary{Started: tc.b.at, StudyID: tc.b.study, Seq: tc.b.seq}
			if got := CompareSummary(sa, sb); got != tc.want {
				t.Errorf("CompareSummary = %d, want %d", got, tc.want)
			}
			if got := CompareSummary(sb, sa); got != -tc.want {
				t.Errorf("CompareSummary reversed = %d, want %d", got, -tc.want)
			}
			ta := Trial{Started: tc.a.at, StudyID: tc.a.study, Seq: tc.a.seq}
			tb := Trial{Started: tc.b.at, StudyID: tc.b.study, Seq: tc.b.seq}
			if got := CompareTrial(ta, tb); got != tc.want {
				t.Errorf("CompareTrial = %d, want %d", got, tc.want)
			}
		})
	}
}
