package chart

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Config is one measured config on the front chart.
type Config struct {
	ID         string   `json:"id"`
	Flags      []string `json:"flags,omitempty"` // against vLLM's default
	Throughput float64  `json:"throughput"`
	Latency    float64  `json:"latency"` // ms
	VRAM       float64  `json:"vram_gib"`
	Runs       int      `json:"runs,omitempty"`
}

// FrontData is what the front chart shows.
type FrontData struct {
	Title      string
	Throughput string // metric names, for the axes and the hover text
	Latency    string
	// Front holds the configs no other beats on throughput, latency and
	// peak VRAM together.
	Front []Config
	// Default is vLLM's default config, Recommended the verdict's pick
	// (nil: not measured, none).
	Default, Recommended *Config
	// Others are the remaining measured configs.
	Others []Config
	// Gain is the verdict's text on the recommendation against the
	// default (its significance and interval), shown under the title.
	Gain string
	// SLO bounds on the two axes (0: none).
	LatencyLimit, ThroughputLimit float64
	// VRAMEstimated says the VRAM figures are estimates from
	// --gpu-memory-utilization, not measurements.
	VRAMEstimated bool
}

// Front legend names, used by the tests that read the charts back.
const (
	FrontName      = "Pareto front"
	VRAMOnlyName   = "on the front by VRAM only"
	DefaultName    = "vLLM default"
	RecommendName  = "recommended"
	OthersName     = "other configs"
	frontStepWidth = 1.2
)

// Front is the throughput-vs-latency chart of a front: the members no
// config beats on throughput and latency as blue circles joined by a step
// line, the members on the front only by VRAM in light blue, each member
// labelled with its peak VRAM; vLLM's default an orange square and the
// recommended config a green diamond, both labelled; other configs small
// grey rings; the SLO bounds as red dashed lines.
func Front(d FrontData) Figure {
	unit := Unit(d.Throughput)
	tip := func(role string, c Config) string {
		fl := strings.Join(c.Flags, " ")
		if fl == "" {
			fl = "(vLLM's default flags)"
		}
		s := fmt.Sprintf("%sconfig %s\n%s\n%s %.1f %s\n%s %.2f ms\npeak VRAM %s", role, c.ID, fl, d.Throughput, c.Throughput, unit, d.Latency, c.Latency, d.vram(c.VRAM))
		if c.Runs > 0 {
			s += fmt.Sprintf("\n%d runs", c.Runs)
		}
		return s
	}
	pt := func(role string, c Config, label string) Point {
		return Point{X: c.Latency, Y: c.Throughput, Label: label, Tip: tip(role, c)}
	}
	var step, vramOnly []Point
	best := twoD(d.Front)
	named := map[string]bool{}
	for _, c := range []*Config{d.Default, d.Recommended} {
		if c != nil {
			named[c.ID] = true
		}
	}
	for i, c := range d.Front {
		q := pt("", c, d.vram(c.VRAM))
		q.Covered = named[c.ID]
		if best[i] {
			step = append(step, q)
		} else {
			vramOnly = append(vramOnly, q)
		}
	}
	slices.SortFunc(step, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
	p := Panel{X: Axis{Name: d.Latency, Unit: "ms"}, Y: Axis{Name: d.Throughput, Unit: unit}}
	if len(d.Others) > 0 {
		s := Series{Name: OthersName, Kind: Scatter, Colour: Grey, Marker: Marker{Shape: Ring, Size: 6}}
		for _, c := range d.Others {
			s.Points = append(s.Points, pt("", c, ""))
		}
		p.Series = append(p.Series, s)
	}
	if len(step) > 0 {
		p.Series = append(p.Series, Series{Name: FrontName, Kind: Step, Colour: Blue, Marker: Marker{Shape: Circle, Size: 9}, Width: frontStepWidth, Points: step})
	}
	if len(vramOnly) > 0 {
		p.Series = append(p.Series, Series{Name: VRAMOnlyName, Kind: Scatter, Colour: LightBlue, Marker: Marker{Shape: Circle, Size: 9}, Points: vramOnly})
	}
	if c := d.Default; c != nil {
		p.Series = append(p.Series, Series{Name: DefaultName, Kind: Scatter, Colour: Orange, Marker: Marker{Shape: Square, Size: 11},
			Points: []Point{pt("vLLM default: ", *c, DefaultName+", "+d.vram(c.VRAM))}})
	}
	if c := d.Recommended; c != nil {
		p.Series = append(p.Series, Series{Name: RecommendName, Kind: Scatter, Colour: Green, Marker: Marker{Shape: Diamond, Size: 14},
			Points: []Point{pt("recommended: ", *c, RecommendName+", "+d.vram(c.VRAM))}})
	}
	if d.LatencyLimit > 0 {
		p.Rules = append(p.Rules, Rule{Name: fmt.Sprintf("SLO %s <= %g ms", d.Latency, d.LatencyLimit), OnX: true, Value: d.LatencyLimit, Colour: Red})
	}
	if d.ThroughputLimit > 0 {
		p.Rules = append(p.Rules, Rule{Name: fmt.Sprintf("SLO %s >= %g %s", d.Throughput, d.ThroughputLimit, unit), Value: d.ThroughputLimit, Colour: Red})
	}
	sub := fmt.Sprintf("%d configs on the front; labels: peak VRAM", len(d.Front))
	if d.VRAMEstimated {
		sub += " (~ estimated from --gpu-memory-utilization)"
	}
	if d.Gain != "" {
		sub = wrap(d.Gain, 90) + "\n" + sub
	}
	return Figure{Title: d.Title, Subtitle: sub, Page: "Pareto front", Panels: []Panel{p}}
}

func (d FrontData) vram(v float64) string {
	if d.VRAMEstimated {
		return fmt.Sprintf("~%.1f GiB", v)
	}
	return fmt.Sprintf("%.1f GiB", v)
}

// twoD marks the configs no other config beats on throughput and latency
// (at least as good on both, better on one).
func twoD(cs []Config) []bool {
	out := make([]bool, len(cs))
	for i, a := range cs {
		out[i] = true
		for j, b := range cs {
			if i != j && b.Throughput >= a.Throughput && b.Latency <= a.Latency && (b.Throughput > a.Throughput || b.Latency < a.Latency) {
				out[i] = false
				break
			}
		}
	}
	return out
}

// wrap breaks text into lines of at most width characters at spaces (a
// subtitle must fit an 800 px frame).
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
