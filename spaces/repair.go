package spaces

import (
	"errors"
	"math"
	"slices"
)

// repairHalvings bounds the bisection of Repairs along one axis: a
// millionth of the widest (log) range, below one unit of any integer flag.
const repairHalvings = 40

// Repairs returns the configs nearest c that the space admits, when c breaks
// a constraint (and nothing else): for each tuned parameter the broken
// constraint reads, other than those named in keep, c with that parameter
// alone moved, to each other level of a bool or categorical, and on each
// side of a number to the value nearest c's that meets every constraint
// (bisection, on the log scale of a log parameter). Nil when c is valid or
// out of range.
//
// A step across a constraint is otherwise lost, and with it the region
// behind: a token budget lowered below max_num_seqs, or chunked prefill
// turned off below a max_model_len budget, is invalid however good the
// neighbourhood; the repaired step lowers max_num_seqs with it, or raises
// the budget. The ground truth's polish and the search's moves both use it.
func (s *Space) Repairs(c Config, keep ...string) []Config {
	var ce *ConstraintError
	if err := s.Validate(c); err == nil || !errors.As(err, &ce) {
		return nil
	}
	i := slices.IndexFunc(s.Constraints, func(k Constraint) bool { return k.Name == ce.Constraint })
	if i < 0 {
		return nil
	}
	var out []Config
	seen := map[string]bool{}
	add := func(n Config) {
		if id := n.ID(); !seen[id] && s.Validate(n) == nil {
			seen[id] = true
			out = append(out, n)
		}
	}
	done := map[string]bool{}
	for _, name := range s.Constraints[i].Expr.Idents() {
		p, ok := s.Param(name)
		if done[name] || slices.Contains(keep, name) || !ok || !p.Tune || p.Fixed != nil {
			continue
		}
		done[name] = true
		v, ok := c.Get(name)
		if !ok {
			continue
		}
		if p.Kind == Bool || p.Kind == Categorical {
			for _, l := range p.Discrete() {
				if !l.Equal(v) {
					add(c.With(name, l))
				}
			}
			continue
		}
		for _, end := range []float64{p.Min, p.Max} {
			if n, ok := s.nearestValid(c, p, v.Float(), end); ok {
				add(n)
			}
		}
	}
	return out
}

// nearestValid returns c with p moved from its value from toward end, to
// the valid value nearest from; ok is false when end itself is invalid.
func (s *Space) nearestValid(c Config, p *Param, from, end float64) (Config, bool) {
	logScale := p.Log && from > 0 && end > 0
	at := func(t float64) Config {
		x := from + t*(end-from)
		if logScale {
			x = math.Exp(math.Log(from) + t*(math.Log(end)-math.Log(from)))
		}
		return c.With(p.Name, p.FromFloat(x))
	}
	good := at(1)
	if s.Validate(good) != nil {
		return Config{}, false
	}
	lo, hi := 0.0, 1.0 // at(lo) breaks a constraint, at(hi) does not
	for range repairHalvings {
		mid := (lo + hi) / 2
		if n := at(mid); s.Validate(n) == nil {
			hi, good = mid, n
		} else {
			lo = mid
		}
	}
	return good, true
}
