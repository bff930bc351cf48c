package service

import (
	"cmp"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// Paging of GET /api/v1/studies/{id}/trials.
const (
	DefaultTrialLimit = 100
	MaxTrialLimit     = 1000
)

// trialSorts are the sort keys of the trials table (its columns): an
// ordering, or a value that some trials lack.
var trialSorts = map[string]struct {
	cmp func(a, b *trialRow) int
	opt func(r *trialRow) *float64
}{
	"seq":        {cmp: func(a, b *trialRow) int { return cmp.Compare(a.Seq, b.Seq) }},
	"started":    {cmp: func(a, b *trialRow) int { return a.Started.Compare(b.Started) }},
	"verdict":    {cmp: func(a, b *trialRow) int { return cmp.Compare(a.Verdict, b.Verdict) }},
	"config_id":  {cmp: func(a, b *trialRow) int { return cmp.Compare(a.ConfigID, b.ConfigID) }},
	"repeat":     {cmp: func(a, b *trialRow) int { return cmp.Compare(a.Repeat, b.Repeat) }},
	"throughput": {opt: func(r *trialRow) *float64 { return r.Throughput }},
	"latency":    {opt: func(r *trialRow) *float64 { return r.Latency }},
	"vram_gib":   {opt: func(r *trialRow) *float64 { return r.VRAM }},
	"duration_s": {opt: func(r *trialRow) *float64 { return r.DurationS }},
}

// trialQuery is the query of the trials table: filters (those of `tuner
// trials`: --state; and a config), sort and page.
type trialQuery struct {
	filter        store.TrialFilter
	sort, order   string
	offset, limit int
}

// parseTrialQuery reads ?state=&config=&sort=&order=&offset=&limit=.
func parseTrialQuery(v url.Values) (trialQuery, error) {
	q := trialQuery{sort: "seq", order: "asc", limit: DefaultTrialLimit}
	var err error
	if q.filter, err = tuner.ParseTrialFilter(v.Get("state")); err != nil {
		return q, err
	}
	q.filter.ConfigID = v.Get("config")
	if s := v.Get("sort"); s != "" {
		if _, ok := trialSorts[s]; !ok {
			return q, tuner.Usagef("sort %q: want one of %s", s, strings.Join(slices.Sorted(maps.Keys(trialSorts)), ", "))
		}
		q.sort = s
	}
	if o := v.Get("order"); o != "" {
		if o != "asc" && o != "desc" {
			return q, tuner.Usagef("order %q: want asc or desc", o)
		}
		q.order = o
	}
	num := func(name string, min, max int, dst *int) error {
		s := v.Get(name)
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < min || n > max {
			return tuner.Usagef("%s %q: want an integer from %d to %d", name, s, min, max)
		}
		*dst = n
		return nil
	}
	if err := num("limit", 1, MaxTrialLimit, &q.limit); err != nil {
		return q, err
	}
	if err := num("offset", 0, 1<<31-1, &q.offset); err != nil {
		return q, err
	}
	return q, nil
}

// page filters, sorts (stable, trials without the value last) and cuts
// rows, which it does not modify.
func (q trialQuery) page(rows []trialRow, m tuner.Metrics) trialPage {
	sel := make([]*trialRow, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		if (len(q.filter.States) == 0 || slices.Contains(q.filter.States, r.State)) && (q.filter.ConfigID == "" || r.ConfigID == q.filter.ConfigID) {
			sel = append(sel, r)
		}
	}
	if q.sort != "seq" || q.order != "asc" {
		by, sign := trialSorts[q.sort], 1
		if q.order == "desc" {
			sign = -1
		}
		slices.SortStableFunc(sel, func(a, b *trialRow) int {
			if by.opt == nil {
				return sign * by.cmp(a, b)
			}
			x, y := by.opt(a), by.opt(b)
			if x == nil || y == nil { // absent values last in either order
				return cmpBool(x == nil, y == nil)
			}
			return sign * cmp.Compare(*x, *y)
		})
	}
	p := trialPage{Total: len(sel), Offset: q.offset, Limit: q.limit, Sort: q.sort, Order: q.order, Metrics: m, Trials: []trialRow{}}
	for _, r := range sel[min(q.offset, len(sel)):min(q.offset+q.limit, len(sel))] {
		p.Trials = append(p.Trials, *r)
	}
	return p
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
