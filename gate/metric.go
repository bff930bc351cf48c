package gate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Direction says which way a metric gets worse.
type Direction int

const (
	// LowerIsBetter: latencies; an increase is a regression.
	LowerIsBetter Direction = iota
	// HigherIsBetter: throughputs; a decrease is a regression.
	HigherIsBetter
)

func (d Direction) String() string {
	if d == HigherIsBetter {
		return "higher_is_better"
	}
	return "lower_is_better"
}

// MarshalText writes the direction's name in JSON reports.
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Metric is one tested quantity: a quantile of one sample series.
type Metric struct {
	// Name identifies the metric in reports and threshold overrides:
	// "tpot_p50", "ttft_p99", "output_throughput".
	Name string `json:"name"`
	// Series is the key of the samples in Cell.Samples: "tpot".
	Series string `json:"series"`
	// Quantile in (0, 1). 0.5 is tested with the Mann-Whitney U test, any
	// other value (a tail) with a permutation test of that quantile.
	Quantile  float64   `json:"quantile"`
	Direction Direction `json:"direction"`
	Unit      string    `json:"unit"`
}

// ErrUnknownMetric is returned for a metric name that ParseMetric cannot
// read or a threshold override for a metric that is not tested.
var ErrUnknownMetric = errors.New("unknown metric")

type seriesInfo struct {
	dir  Direction
	unit string
}

// series are the sample series tuner's runs record: per-request latencies
// and per-window throughputs.
var series = map[string]seriesInfo{
	"ttft":               {LowerIsBetter, "ms"},
	"tpot":               {LowerIsBetter, "ms"},
	"itl":                {LowerIsBetter, "ms"},
	"e2el":               {LowerIsBetter, "ms"},
	"output_throughput":  {HigherIsBetter, "tok/s"},
	"request_throughput": {HigherIsBetter, "req/s"},
}

// DefaultMetrics are the metrics the issue names: TTFT, TPOT, ITL and E2EL
// at the median and p99, and the median per-window output throughput.
func DefaultMetrics() []Metric {
	names := []string{"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p50", "itl_p99", "e2el_p50", "e2el_p99", "output_throughput"}
	out := make([]Metric, len(names))
	for i, n := range names {
		m, err := ParseMetric(n)
		if err != nil {
			panic(err) // the names above are constants
		}
		out[i] = m
	}
	return out
}

// ParseMetric reads a metric name: SERIES_pQ with Q a percentile in (0, 100)
// ("tpot_p50", "ttft_p99", "e2el_p99.9"), or a bare SERIES for its median.
// SERIES is one of ttft, tpot, itl, e2el, output_throughput,
// request_throughput.
func ParseMetric(name string) (Metric, error) {
	if info, ok := series[name]; ok {
		return Metric{Name: name, Series: name, Quantile: 0.5, Direction: info.dir, Unit: info.unit}, nil
	}
	i := strings.LastIndex(name, "_p")
	if i <= 0 {
		return Metric{}, fmt.Errorf("metric %q: %w (want SERIES_pNN, e.g. tpot_p50)", name, ErrUnknownMetric)
	}
	s, q := name[:i], name[i+2:]
	info, ok := series[s]
	if !ok {
		return Metric{}, fmt.Errorf("metric %q: series %q: %w (known: ttft, tpot, itl, e2el, output_throughput, request_throughput)", name, s, ErrUnknownMetric)
	}
	pct, err := strconv.ParseFloat(q, 64)
	if err != nil || strings.ContainsAny(q, "eE+-xXpPnN_") || !(pct > 0 && pct < 100) {
		return Metric{}, fmt.Errorf("metric %q: percentile %q: %w (want a number in (0, 100))", name, q, ErrUnknownMetric)
	}
	// Through integers so that "p99.9" is exactly the float 0.999.
	quant := math.Round(pct*1e6) / 1e8
	if !(quant > 0 && quant < 1) {
		return Metric{}, fmt.Errorf("metric %q: percentile %q: %w (want a number in (0, 100))", name, q, ErrUnknownMetric)
	}
	return Metric{Name: name, Series: s, Quantile: quant, Direction: info.dir, Unit: info.unit}, nil
}
