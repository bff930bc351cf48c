package trial

import (
	"fmt"
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

// ParseSLO parses "ttft_p99<=800ms,tpot_p99<=60ms,output_throughput>=1000".
// Latency values take ms, s or us (default ms). Empty input is no SLO.
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
		var probe Metrics
		if _, ok := probe.Value(name); !ok {
			return nil, fmt.Errorf("slo term %d %q: unknown metric %q (e.g. ttft_p99, tpot_p99, itl_p99, e2el_p99, output_throughput)", i+1, term, name)
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
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || f < 0 || f != f || f*mult > 1e12 {
			return nil, fmt.Errorf("slo term %d %q: bad value %q", i+1, term, val)
		}
		out = append(out, Bound{Metric: name, Op: op, Limit: f * mult})
	}
	return out, nil
}

func isLatency(metric string) bool {
	for _, p := range []string{"ttft_", "tpot_", "itl_", "e2el_"} {
		if strings.HasPrefix(metric, p) {
			return true
		}
	}
	return false
}

// Check reports whether m meets every bound and lists the violated ones.
func (s SLO) Check(m *Metrics) (bool, []string) {
	var bad []string
	for _, b := range s {
		v, ok := m.Value(b.Metric)
		if !ok || !b.holds(v) {
			bad = append(bad, fmt.Sprintf("%s=%.4g (want %s %.4g)", b.Metric, v, b.Op, b.Limit))
		}
	}
	return len(bad) == 0, bad
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
