package trial

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Bound is one SLO term, e.g. ttft_p99 <= 800 ms. Latency limits are held in
// milliseconds; throughput and rate bounds in their own units.
type Bound struct {
	Metric string  `json:"metric"` // a name Metrics.Value understands
	Op     string  `json:"op"`     // "<=", "<", ">=", ">"
	Limit  float64 `json:"limit"`
}

// SLO is a conjunction of bounds.
type SLO []Bound

// DefaultMaxErrorRate bounds the error rate of every SLO that does not
// bound error_rate itself (see SLO.Effective): a level failing 20% of its
// requests (rate-limited, rejected, cut off) does not meet the SLO, even
// when no SLO was given.
const DefaultMaxErrorRate = 0.01

// ParseSLO parses "ttft_p99<=800ms,tpot_p99<=60ms,output_throughput>=1000".
// Latency values take ms, s or us (default ms); error_rate takes a fraction
// (0.05) or a percentage (5%). Empty input is no SLO; either way
// error_rate<=1% applies unless the input bounds error_rate (Effective).
func ParseSLO(s string) (SLO, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out SLO
	for i, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		var op string
		for _, o := range []string{"<=", ">=", "<", ">"} {
			if strings.Contains(term, o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, fmt.Errorf("slo term %d %q: want METRIC<=VALUE (e.g. ttft_p99<=500ms)", i+1, term)
		}
		// The whole run of operator characters must be the operator: a
		// mistyped "=<" is an operator error, not the metric "tpot_p99=".
		if i0 := strings.IndexAny(term, "<>=!"); i0 >= 0 {
			j := i0
			for j < len(term) && strings.ContainsRune("<>=!", rune(term[j])) {
				j++
			}
			if got := term[i0:j]; got != op {
				return nil, fmt.Errorf("slo term %d %q: bad operator %q (want <=, >=, < or >)", i+1, term, got)
			}
		}
		name, val, _ := strings.Cut(term, op)
		name = strings.TrimSpace(name)
		val = strings.TrimSpace(val)
		probe := Metrics{PrefixCache: &PrefixCache{}}
		if _, ok := probe.Value(name); !ok {
			return nil, fmt.Errorf("slo term %d %q: unknown metric %q (e.g. ttft_p99, tpot_p99, itl_p99, e2el_p99, output_throughput, prefix_cache_hit_rate)", i+1, term, name)
		}
		if higherIsBetter(name) != (op[0] == '>') {
			return nil, fmt.Errorf("slo term %d %q: %s bounds %s from the wrong side: a service level is METRIC<=VALUE (or <) for latencies, error_rate and fairness, METRIC>=VALUE (or >) for throughputs (e.g. %s)", i+1, term, op, name, sloExample(name))
		}
		latency := isLatency(name)
		mult := 1.0
		if latency {
			switch {
			case strings.HasSuffix(val, "ms"):
				val = strings.TrimSuffix(val, "ms")
			case strings.HasSuffix(val, "us"):
				val, mult = strings.TrimSuffix(val, "us"), 1e-3
			case strings.HasSuffix(val, "s"):
				val, mult = strings.TrimSuffix(val, "s"), 1e3
			}
		}
		pct := false
		if name == "error_rate" {
			val, pct = strings.CutSuffix(val, "%")
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || f < 0 || f != f || f*mult > 1e12 {
			return nil, fmt.Errorf("slo term %d %q: bad value %q", i+1, term, val)
		}
		if pct {
			f /= 100
		}
		if name == "prefix_cache_hit_rate" && f > 1 {
			return nil, fmt.Errorf("slo term %d %q: prefix_cache_hit_rate is a fraction (0.5)", i+1, term)
		}
		if name == "error_rate" && f > 1 {
			return nil, fmt.Errorf("slo term %d %q: error_rate is a fraction (0.01) or a percentage (1%%)", i+1, term)
		}
		out = append(out, Bound{Metric: name, Op: op, Limit: f * mult})
	}
	return out, nil
}

// higherIsBetter reports whether a bound on metric is a floor (throughputs,
// the prefix-cache hit rate) rather than a ceiling (latencies, error_rate,
// fairness ratios).
func higherIsBetter(metric string) bool {
	return !isLatency(metric) && metric != "error_rate" && !strings.HasPrefix(metric, "fairness_")
}

// sloExample is a well-formed bound on metric.
func sloExample(metric string) string {
	switch {
	case higherIsBetter(metric):
		return metric + ">=1000"
	case isLatency(metric):
		return metric + "<=50ms"
	case metric == "error_rate":
		return "error_rate<=1%"
	}
	return metric + "<=1.5"
}

func isLatency(metric string) bool {
	for _, p := range []string{"ttft_", "tpot_", "itl_", "e2el_"} {
		if strings.HasPrefix(metric, p) {
			return true
		}
	}
	return false
}

// Effective is the SLO a level is judged by: s, plus error_rate <=
// DefaultMaxErrorRate when s has no error_rate bound. String and the
// stored study keys keep the user's bounds only.
func (s SLO) Effective() SLO {
	for _, b := range s {
		if b.Metric == "error_rate" {
			return s
		}
	}
	return append(slices.Clip(s), Bound{Metric: "error_rate", Op: "<=", Limit: DefaultMaxErrorRate})
}

// Check reports whether m meets every bound of the effective SLO and is
// not overloaded, and lists what it breaks.
func (s SLO) Check(m *Metrics) (bool, []string) {
	var bad []string
	if m.Overloaded {
		bad = append(bad, m.OverloadText())
	}
	for _, b := range s.Effective() {
		v, ok := m.Value(b.Metric)
		if !ok || !b.holds(v) {
			bad = append(bad, fmt.Sprintf("%s=%.4g (want %s %.4g)", b.Metric, v, b.Op, b.Limit))
		}
	}
	return len(bad) == 0, bad
}

// Violation sums the relative excess of m over every bound of the
// effective SLO it breaks (a config that misses a 500 ms limit by 50 ms
// scores 0.1), plus the shortfall of an overloaded run, whose latencies
// mean nothing: 0 exactly when Check holds, so searches can rank the
// configs that miss the SLO by how far they miss it.
func (s SLO) Violation(m *Metrics) float64 {
	total := 0.0
	if m.Overloaded {
		short := 1e-6
		if m.OfferedRate > 0 {
			short = math.Max(1-m.AchievedRate/m.OfferedRate, short)
		}
		total += short
	}
	for _, b := range s.Effective() {
		v, ok := m.Value(b.Metric)
		switch {
		case !ok || math.IsNaN(v):
			total++
		case !b.Holds(v):
			total += math.Max(math.Abs(v-b.Limit)/math.Max(math.Abs(b.Limit), 1e-9), 1e-6)
		}
	}
	return total
}

// Relaxed is s with every bound loosened by the share m (upper limits
// raised, lower ones lowered by m x |limit|): "within m of the SLO", as a
// short, noisier measurement is judged before it is measured in full.
func (s SLO) Relaxed(m float64) SLO {
	out := make(SLO, len(s))
	for i, b := range s {
		d := m * math.Abs(b.Limit)
		switch b.Op {
		case "<=", "<":
			b.Limit += d
		case ">=", ">":
			b.Limit -= d
		}
		out[i] = b
	}
	return out
}

func (b Bound) holds(v float64) bool { return b.Holds(v) }

// Holds reports whether v satisfies the bound (an unknown operator never
// does).
func (b Bound) Holds(v float64) bool {
	switch b.Op {
	case "<=":
		return v <= b.Limit
	case "<":
		return v < b.Limit
	case ">=":
		return v >= b.Limit
	case ">":
		return v > b.Limit
	}
	return false
}

// String renders the SLO in the syntax ParseSLO reads.
func (s SLO) String() string {
	parts := make([]string, len(s))
	for i, b := range s {
		unit := ""
		if isLatency(b.Metric) {
			unit = "ms"
		}
		parts[i] = fmt.Sprintf("%s%s%s%s", b.Metric, b.Op, strconv.FormatFloat(b.Limit, 'f', -1, 64), unit)
	}
	return strings.Join(parts, ",")
}
