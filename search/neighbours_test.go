package search

import (
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// A late search's pool holds the incumbent with each level parameter moved
// to each of its other levels (every other value kept), except moves that
// are invalid or tried; the opening's pool does not.
func TestLevelNeighbours(t *testing.T) {
	sp := h100(t)
	slo, err := trial.ParseSLO("tpot_p99<=40ms")
	if err != nil {
		t.Fatal(err)
	}
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Scorer = sp, slo, oracle{pc.Objectives}
	def := sp.DefaultConfig()
	for i := range pc.LateAfter {
		c, err := sp.Normalize(def.With("max_num_seqs", spaces.IntValue(32+16*i)).With("gpu_memory_utilization", spaces.FloatValue(0.8)))
		if err != nil {
			t.Fatal(err)
		}
		pc.History = append(pc.History, Observation{Config: c, Result: synth(c)})
	}
	p := newProposer(t, pc)
	sc := p.scalariser()
	obs, _, _, k := p.incumbent(sc)
	if k < 0 {
		t.Fatal("no incumbent")
	}
	inc := obs[k].Config

	got := map[string]spaces.Config{}
	for _, c := range p.levelNeighbours(sc, map[string]bool{}) {
		got[c.ID()] = c
	}
	want := 0
	for _, d := range p.dims {
		for _, l := range d.levels {
			v, _ := inc.Get(d.p.Name)
			if l.String() == v.String() {
				continue
			}
			c, err := sp.Normalize(inc.With(d.p.Name, l))
			if err != nil || sp.Validate(c) != nil {
				continue
			}
			want++
			if _, ok := got[c.ID()]; !ok {
				t.Errorf("%s=%v: neighbour %v missing", d.p.Name, l, c)
			}
		}
	}
	if want == 0 || len(got) != want {
		t.Fatalf("%d neighbours, want %d", len(got), want)
	}

	pool, err := p.pool(sc, 32, true)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, c := range pool {
		in[c.ID()] = true
	}
	for id, c := range got {
		if !in[id] {
			t.Errorf("late pool lacks neighbour %v", c)
		}
	}

	// A tried neighbour is not proposed again.
	checked := false
	for _, c := range got {
		p.Tell(c, synth(c))
		if obs, _, _, k := p.incumbent(p.scalariser()); obs[k].Config.ID() != inc.ID() {
			continue // the neighbour became the incumbent: its own neighbours differ
		}
		for _, n := range p.levelNeighbours(p.scalariser(), map[string]bool{}) {
			if n.ID() == c.ID() {
				t.Fatalf("tried neighbour %v proposed again", c)
			}
		}
		checked = true
		break
	}
	if !checked {
		t.Fatal("every neighbour tried became the incumbent")
	}

	pc.History = pc.History[:pc.LateAfter-1]
	early := newProposer(t, pc)
	if early.late() {
		t.Fatal("late in the opening")
	}
	if pool, err := early.pool(early.scalariser(), 32, true); err != nil || len(pool) > 32 {
		t.Fatalf("opening pool of %d (err %v), want at most 32: no neighbours", len(pool), err)
	}
}
