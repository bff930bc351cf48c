package service

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// DefaultCacheStudies is how many studies the service keeps decoded.
const DefaultCacheStudies = 8

// studyCache keeps the studies last read, decoded, with what the endpoints
// derive from them. It reads the trials' summaries (store.Summary, about
// 1 KB each), never the full records (tens of KB of per-level metrics:
// GET /api/v1/trials/{id} reads one). A trial that is no longer running
// never changes and trials are never deleted, so a request rereads only
// the tail of a study from its first running trial on
// (store.TrialFilter.FromSeq). Studies used least recently are dropped
// beyond max.
type studyCache struct {
	max int

	mu      sync.Mutex
	entries map[string]*cacheEntry
	tick    uint64
}

type cacheEntry struct {
	mu   sync.Mutex // one refresh of a study at a time
	snap *studySnap
	used uint64 // guarded by studyCache.mu
}

func newStudyCache(max int) *studyCache {
	if max <= 0 {
		max = DefaultCacheStudies
	}
	return &studyCache{max: max, entries: map[string]*cacheEntry{}}
}

// studySnap is a study as of one read. It is never modified once built:
// a newer read builds a new one sharing nothing mutable with it.
type studySnap struct {
	study  store.Study
	trials []store.Trial // in sequence order: trials[i].Seq == i+1
	rows   []trialRow    // the same order
	// open is the index of the first trial still running (len(trials)
	// when none): it and the trials after it are reread.
	open      int
	metrics   tuner.Metrics
	defaultID string // vLLM's default config in the study

	baseOnce sync.Once
	base     atomic.Pointer[judgement] // under the study's own SLO and the default k
	// prevBase is the base judgement of the snapshot this one was built
	// from, if it had one, and keep the trials the two share: only the
	// configs of the trials after those are judged again.
	prevBase *judgement
	keep     int
}

// judgement is a study's trials judged as `tuner pareto` and `tuner
// recommend` judge them.
type judgement struct {
	slo   trial.SLO
	k     float64
	cands []tuner.Candidate
	first []int // per candidate, the index of its config's first finished trial (cands are in that order)
	front tuner.FrontView
	recs  sync.Map // tuner.Prefer -> its recommendation (see studyView.recommendation)
}

// get returns the study's current snapshot.
func (c *studyCache) get(ctx context.Context, db store.DB, id string) (*studySnap, error) {
	e := c.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	snap, err := refresh(ctx, db, id, e.snap)
	if err != nil {
		if e.snap == nil {
			c.drop(id, e)
		}
		return nil, err
	}
	e.snap = snap
	return snap, nil
}

func (c *studyCache) entry(id string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	e := c.entries[id]
	if e == nil {
		e = &cacheEntry{}
		c.entries[id] = e
	}
	e.used = c.tick
	for len(c.entries) > c.max {
		var oldest string
		for k, x := range c.entries {
			if x != e && (oldest == "" || x.used < c.entries[oldest].used) {
				oldest = k
			}
		}
		delete(c.entries, oldest)
	}
	return e
}

func (c *studyCache) drop(id string, e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[id] == e {
		delete(c.entries, id)
	}
}

// refresh returns old when nothing changed since it was read, else a new
// snapshot with old's settled trials and the tail reread.
func refresh(ctx context.Context, db store.DB, id string, old *studySnap) (*studySnap, error) {
	if old == nil {
		st, err := db.Study(ctx, id)
		if err != nil {
			return nil, err
		}
		ts, err := store.SummaryTrials(ctx, db, id, store.TrialFilter{})
		if err != nil {
			return nil, err
		}
		return buildSnap(st, nil, ts), nil
	}
	tail, err := store.SummaryTrials(ctx, db, id, store.TrialFilter{FromSeq: uint64(old.open) + 1})
	if err != nil {
		return nil, err
	}
	if len(tail) == len(old.trials)-old.open {
		same := true
		for i, t := range tail {
			same = same && t.State == old.trials[old.open+i].State
		}
		if same {
			return old, nil
		}
	}
	return buildSnap(old.study, old, tail), nil
}

// buildSnap is old's settled trials followed by tail (all of them when old
// is nil).
func buildSnap(st store.Study, old *studySnap, tail []store.Trial) *studySnap {
	keep := 0
	if old != nil {
		keep = old.open
	}
	s := &studySnap{study: st, metrics: tuner.StudyMetrics(st), keep: keep}
	if old != nil {
		s.prevBase = old.base.Load()
	}
	s.trials = make([]store.Trial, keep, keep+len(tail))
	s.rows = make([]trialRow, keep, keep+len(tail))
	if old != nil {
		copy(s.trials, old.trials[:keep])
		copy(s.rows, old.rows[:keep])
	}
	for _, t := range tail {
		s.trials = append(s.trials, t)
		s.rows = append(s.rows, newTrialRow(t, s.metrics))
	}
	s.open = len(s.trials)
	for i := keep; i < len(s.trials); i++ {
		if s.trials[i].State == store.StateRunning {
			s.open = i
			break
		}
	}
	// It depends on the study's key, else on its first trial: settled once
	// known (and resolving the default space takes milliseconds).
	if old != nil && old.defaultID != "" {
		s.defaultID = old.defaultID
	} else {
		s.defaultID = tuner.DefaultConfigIDOf(st, s.trials)
	}
	return s
}

// judge returns the trials judged under slo (nil: the study's own) and k
// (negative: the default); the default judgement is computed once per
// snapshot, from the previous snapshot's for the configs that did not
// change.
func (s *studySnap) judge(slo trial.SLO, k float64) *judgement {
	if slo == nil && k < 0 {
		s.baseOnce.Do(func() {
			s.base.Store(newJudgement(s, s.study.SLO(), tuner.DefaultConfig().MADK, s.prevBase, s.keep))
			s.prevBase = nil
		})
		return s.base.Load()
	}
	if slo == nil {
		slo = s.study.SLO()
	}
	if k < 0 {
		k = tuner.DefaultConfig().MADK
	}
	return newJudgement(s, slo, k, nil, 0)
}

// newJudgement aggregates the trials of s. With prev (the judgement of
// the first keep trials, which have not changed since) only the configs of
// the later trials are aggregated again: a candidate depends on its own
// config's trials only, and candidates stay in the order of their first
// finished trial, as tuner.Aggregate orders them.
func newJudgement(s *studySnap, slo trial.SLO, k float64, prev *judgement, keep int) *judgement {
	j := &judgement{slo: slo, k: k}
	touched := map[string]bool{}
	if prev != nil {
		for i := keep; i < len(s.trials); i++ {
			touched[s.trials[i].ConfigKey()] = true
		}
	}
	sub := s.trials
	if prev != nil {
		sub = nil
	}
	first := map[string]int{}
	for i := range s.trials {
		t := &s.trials[i]
		id := t.ConfigKey()
		if prev != nil {
			if !touched[id] {
				continue
			}
			sub = append(sub, *t)
		}
		if _, ok := first[id]; !ok && t.State.Measured() && t.Result != nil {
			first[id] = i
		}
	}
	fresh := tuner.Aggregate(sub, slo, s.metrics, k)
	if prev != nil {
		for i, c := range prev.cands {
			if !touched[c.ConfigID] {
				j.cands, j.first = append(j.cands, c), append(j.first, prev.first[i])
			}
		}
	}
	for _, c := range fresh {
		j.cands, j.first = append(j.cands, c), append(j.first, first[c.ConfigID])
	}
	if prev != nil {
		idx := make([]int, len(j.cands))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(j.first[a], j.first[b]) })
		cands, firsts := make([]tuner.Candidate, len(idx)), make([]int, len(idx))
		for n, i := range idx {
			cands[n], firsts[n] = j.cands[i], j.first[i]
		}
		j.cands, j.first = cands, firsts
	}
	j.front = tuner.NewFrontView(tuner.FrontInput{Cands: j.cands, Judged: j.cands, DefaultID: s.defaultID, Metrics: s.metrics, SLO: slo})
	return j
}

// newTrialRow is a trial as the trials table shows it.
func newTrialRow(t store.Trial, m tuner.Metrics) trialRow {
	r := trialRow{ID: t.ID, Seq: t.Seq, State: t.State, ConfigID: t.ConfigID, Repeat: t.Repeat, Started: t.Started, Ended: t.Ended,
		Verdict: t.Verdict(), Flags: t.Config.Flags()}
	if v, ok := m.Vector(t.Result); ok {
		r.Throughput, r.Latency, r.VRAM = &v[0], &v[1], &v[2]
	}
	if !t.Ended.IsZero() {
		d := t.Ended.Sub(t.Started).Round(time.Millisecond).Seconds()
		r.DurationS = &d
	}
	return r
}
