package search

import (
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// lateFront returns a proposer whose history is LateAfter configs with the
// default levels and varied max_num_seqs and utilisation (a front of
// several members), with LateCrossover set to cross.
func lateFront(t *testing.T, cross float64) *Proposer {
	t.Helper()
	sp := h100(t)
	slo, err := trial.ParseSLO("tpot_p99<=40ms")
	if err != nil {
		t.Fatal(err)
	}
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Scorer, pc.LateCrossover = sp, slo, oracle{pc.Objectives}, cross
	def := sp.DefaultConfig()
	for i := range pc.LateAfter {
		c, err := sp.Normalize(def.With("max_num_seqs", spaces.IntValue(32+16*i)).
			With("gpu_memory_utilization", spaces.FloatValue(0.9-0.02*float64(i))))
		if err != nil {
			t.Fatal(err)
		}
		pc.History = append(pc.History, Observation{Config: c, Result: synth(c)})
	}
	p := newProposer(t, pc)
	if !p.late() || len(p.front) < 3 {
		t.Fatalf("late %v, front of %d: want late, at least 3 members", p.late(), len(p.front))
	}
	return p
}

// mixes counts the configs of pool that are no front member but take every
// parameter's value from one of two front members.
func mixes(p *Proposer, pool []spaces.Config) int {
	var members []spaces.Config
	for _, k := range p.front {
		members = append(members, p.history[k].Config)
	}
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m.ID()] = true
	}
	n := 0
	for _, c := range pool {
		if isMember[c.ID()] {
			continue
		}
	pairs:
		for i, a := range members {
			for _, b := range members[i+1:] {
				for _, d := range p.dims {
					v, _ := c.Get(d.p.Name)
					va, _ := a.Get(d.p.Name)
					vb, _ := b.Get(d.p.Name)
					if v.String() != va.String() && v.String() != vb.String() {
						continue pairs
					}
				}
				n++
				break pairs
			}
		}
	}
	return n
}

// Once late, a LateCrossover share of the mutation draws mixes two front
// members coordinate by coordinate: settings found in different trials
// meet in one candidate.
func TestLateCrossover(t *testing.T) {
	p := lateFront(t, 1)
	a, b := p.units[p.front[0]], p.units[p.front[len(p.front)-1]]
	fromA, fromB := 0, 0
	for range 200 {
		y := p.unitVector(spaces.NewConfig(p.crossover(a, b)))
		for i := range y {
			switch {
			case y[i] == a[i] && a[i] != b[i]:
				fromA++
			case y[i] == b[i] && a[i] != b[i]:
				fromB++
			case y[i] != a[i] && y[i] != b[i]:
				t.Fatalf("coordinate %s is %v, from neither parent (%v, %v)", p.dims[i].p.Name, y[i], a[i], b[i])
			}
		}
	}
	if fromA < 50 || fromB < 50 {
		t.Errorf("coordinates where the parents differ: %d from a, %d from b in 200 crossovers; want both parents used", fromA, fromB)
	}

	pool, err := p.pool(p.scalariser(), 256, true)
	if err != nil {
		t.Fatal(err)
	}
	with := mixes(p, pool)
	none := lateFront(t, -1)
	pool, err = none.pool(none.scalariser(), 256, true)
	if err != nil {
		t.Fatal(err)
	}
	without := mixes(none, pool)
	if with < 5 || with <= 3*without {
		t.Errorf("late pool of 256: %d mixes of two front members with LateCrossover 1, %d without; want at least 5 and over 3x", with, without)
	}
	if none.cfg.LateCrossover != 0 {
		t.Errorf("LateCrossover -1 filled to %v, want 0 (none)", none.cfg.LateCrossover)
	}
}

func TestLateCrossoverChecked(t *testing.T) {
	pc := DefaultProposerConfig()
	pc.Space, pc.LateCrossover = h100(t), 1.5
	if _, err := NewProposer(pc); err == nil {
		t.Fatal("LateCrossover 1.5 accepted")
	}
}
