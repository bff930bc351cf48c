package search

import (
	"fmt"
	"math"

	"github.com/c-bata/goptuna"

	"github.com/vllm-tuner/tuner/spaces"
)

// dim maps one tuned parameter to a goptuna distribution and to the unit
// interval. Parameters with finitely many unordered or listed levels (bool,
// categorical, int with values) use the level index; numeric ranges use
// their own value (log-uniform for log parameters).
type dim struct {
	p      *spaces.Param
	levels []spaces.Value // bool, categorical, listed values; nil for ranges
	// ordinal marks listed numeric levels (int values): sampled as an index
	// with an integer distribution so TPE sees their order.
	ordinal bool
}

func dimsOf(s *spaces.Space) []dim {
	var out []dim
	for _, p := range s.Tuned() {
		d := dim{p: p}
		switch {
		case p.Kind == spaces.Bool || p.Kind == spaces.Categorical:
			d.levels = p.Discrete()
		case len(p.Values) > 0:
			d.levels = p.Discrete()
			d.ordinal = true
		}
		out = append(out, d)
	}
	return out
}

// lowHigh is the numeric range of a range parameter, widened by half a unit
// for integers so the rounded endpoints get their share of the mass.
func (d dim) lowHigh() (float64, float64) {
	lo, hi := d.p.Min, d.p.Max
	if d.p.Kind == spaces.Int && hi > lo {
		lo, hi = lo-0.5, hi+0.5
		if d.p.Log && lo <= 0 {
			lo = d.p.Min
		}
	}
	return lo, hi
}

// distribution returns the goptuna distribution (a value type, as goptuna's
// Suggest* methods build them).
func (d dim) distribution() any {
	switch {
	case d.levels != nil && d.ordinal:
		return goptuna.IntUniformDistribution{Low: 0, High: len(d.levels) - 1}
	case d.levels != nil:
		choices := make([]string, len(d.levels))
		for i, v := range d.levels {
			choices[i] = v.String()
		}
		return goptuna.CategoricalDistribution{Choices: choices}
	}
	lo, hi := d.lowHigh()
	if d.p.Log {
		return goptuna.LogUniformDistribution{Low: lo, High: hi}
	}
	return goptuna.UniformDistribution{Low: lo, High: hi}
}

// suggest asks the goptuna trial for this parameter and maps the answer.
func (d dim) suggest(t goptuna.Trial) (spaces.Value, error) {
	switch dist := d.distribution().(type) {
	case goptuna.IntUniformDistribution:
		i, err := t.SuggestInt(d.p.Name, dist.Low, dist.High)
		if err != nil {
			return spaces.Value{}, err
		}
		return d.fromInternal(float64(i)), nil
	case goptuna.CategoricalDistribution:
		c, err := t.SuggestCategorical(d.p.Name, dist.Choices)
		if err != nil {
			return spaces.Value{}, err
		}
		for i, x := range dist.Choices {
			if x == c {
				return d.levels[i], nil
			}
		}
		return spaces.Value{}, fmt.Errorf("%s: sampler returned unknown choice %q", d.p.Name, c)
	case goptuna.LogUniformDistribution:
		x, err := t.SuggestLogFloat(d.p.Name, dist.Low, dist.High)
		if err != nil {
			return spaces.Value{}, err
		}
		return d.fromInternal(x), nil
	case goptuna.UniformDistribution:
		x, err := t.SuggestFloat(d.p.Name, dist.Low, dist.High)
		if err != nil {
			return spaces.Value{}, err
		}
		return d.fromInternal(x), nil
	}
	return spaces.Value{}, goptuna.ErrUnknownDistribution
}

// fromInternal maps a goptuna internal value to a parameter value: indexes
// are clamped, numbers rounded, snapped and clamped by Param.FromFloat.
func (d dim) fromInternal(x float64) spaces.Value {
	if d.levels != nil {
		i := int(math.Round(x))
		return d.levels[max(0, min(len(d.levels)-1, i))]
	}
	return d.p.FromFloat(x)
}

// toInternal maps a value to goptuna's internal representation; ok is false
// when the value is not a level of the parameter (e.g. a default outside a
// pruned range is clamped into it instead).
func (d dim) toInternal(v spaces.Value) (float64, bool) {
	if d.levels != nil {
		for i, l := range d.levels {
			if l.Equal(v) {
				return float64(i), true
			}
		}
		return 0, false
	}
	lo, hi := d.lowHigh()
	x := v.Float()
	return math.Max(lo, math.Min(hi, x)), x >= d.p.Min-1e-9 && x <= d.p.Max+1e-9
}

// unit maps a value to [0, 1] (log scale for log parameters; levels evenly).
func (d dim) unit(v spaces.Value) float64 {
	if d.levels != nil {
		if len(d.levels) == 1 {
			return 0.5
		}
		x, _ := d.toInternal(v)
		return x / float64(len(d.levels)-1)
	}
	lo, hi := d.lowHigh()
	if hi <= lo {
		return 0.5
	}
	x := math.Max(lo, math.Min(hi, v.Float()))
	if d.p.Log {
		return (math.Log(x) - math.Log(lo)) / (math.Log(hi) - math.Log(lo))
	}
	return (x - lo) / (hi - lo)
}

// fromUnit is the inverse of unit (rounded to a valid value).
func (d dim) fromUnit(u float64) spaces.Value {
	u = math.Max(0, math.Min(1, u))
	if d.levels != nil {
		return d.levels[min(len(d.levels)-1, int(math.Floor(u*float64(len(d.levels)))))]
	}
	lo, hi := d.lowHigh()
	if d.p.Log {
		return d.p.FromFloat(math.Exp(math.Log(lo) + u*(math.Log(hi)-math.Log(lo))))
	}
	return d.p.FromFloat(lo + u*(hi-lo))
}
