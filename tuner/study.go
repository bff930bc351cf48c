package tuner

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// StudyMetrics reads a study's objective names (throughput, latency).
func StudyMetrics(st store.Study) Metrics {
	m := DefaultMetrics()
	objs := st.Key.Objectives
	if len(objs) >= 1 {
		m.Throughput = objs[0].Name
	}
	if len(objs) >= 2 {
		m.Latency = objs[1].Name
	}
	return m
}

// ServedName is the model name a study's engine served (what vllm serve
// and a recommendation take).
func ServedName(k store.StudyKey) string {
	if k.ServedModel != "" {
		return k.ServedModel
	}
	return k.Model
}

// DefaultConfigID is the ID of vLLM's default config for a study's target
// under the default space ("" when the target is not in the catalog or the
// study searched another space).
func DefaultConfigID(k store.StudyKey) string {
	t, err := spaces.DefaultCatalog().Target(k.Model, k.GPU, k.GPUCount)
	if err != nil {
		return ""
	}
	t.EngineVersion = k.EngineVersion
	r, err := spaces.ResolveDefault(t)
	if err != nil || r.Hash() != k.SpaceHash {
		return ""
	}
	return r.DefaultConfig().ID()
}

// DefaultConfigIDOf is the config ID of vLLM's default in a study: that of
// the resolved default space, else the config of the study's first trial
// (the search always runs the default first). trials are the study's, in
// order.
func DefaultConfigIDOf(st store.Study, trials []store.Trial) string {
	if id := DefaultConfigID(st.Key); id != "" {
		return id
	}
	for _, t := range trials {
		if t.Seq == 1 {
			return t.ConfigID
		}
	}
	return ""
}

// ChartConfig is a config's point on the charts: its conservative values
// and its flags against vLLM's default config def.
func ChartConfig(c Candidate, def spaces.Config) chart.Config {
	return chart.Config{ID: c.ConfigID, Flags: c.Config.Diff(def).Flags(), Throughput: c.Score, Latency: c.ConservativeLatency,
		VRAM: c.VRAM.Median, Runs: c.Throughput.N}
}

// FrontInput is what NewFrontView judges.
type FrontInput struct {
	// Cands are the measured configs (a group of studies: each study's).
	Cands []Candidate
	// Judged are the configs vLLM's default and the recommendation are
	// picked among: Cands for one study or a selection, the newest study's
	// in a group; nil: none.
	Judged    []Candidate
	DefaultID string // vLLM's default config (DefaultConfigIDOf)
	Metrics   Metrics
	SLO       trial.SLO
	// Group is a front across studies of different workloads: no
	// recommendation, and vLLM's default is drawn among the others too.
	Group bool
}

// FrontView is a front as `tuner pareto` prints, writes and draws it and
// the service serves and draws it: one computation of which configs are on
// it, which is vLLM's default and which is recommended (Judge).
type FrontView struct {
	// Front holds the SLO-feasible configs no other dominates, best
	// conservative throughput first.
	Front []Candidate `json:"front"`
	// RecommendedID is the config recommend picks ("" when none).
	RecommendedID   string     `json:"recommended,omitempty"`
	Default         *Candidate `json:"default,omitempty"` // vLLM's default when measured
	DefaultConfigID string     `json:"default_config_id,omitempty"`
	// Recommended is the recommended config, also when it is not on the
	// front (a single run outranks it).
	Recommended *Candidate `json:"-"`
	// Verdict is Judge's line (what recommend and search say).
	Verdict string `json:"-"`
	// Others are the other measured configs, for the charts.
	Others []Candidate `json:"-"`
}

// NewFrontView judges a front (see FrontView).
func NewFrontView(in FrontInput) FrontView {
	v := FrontView{Front: []Candidate{}, DefaultConfigID: in.DefaultID}
	for i := range in.Judged {
		if c := in.Judged[i]; c.ConfigID == in.DefaultID && c.Throughput.N > 0 {
			v.Default = &c
		}
	}
	if in.Judged != nil && !in.Group {
		jv := Judge(JudgeInput{Cands: in.Judged, DefaultID: in.DefaultID, Metrics: in.Metrics, SLO: in.SLO, Prefer: PreferThroughput})
		v.Verdict = jv.Text
		if jv.Pick != nil {
			r := *jv.Pick
			v.Recommended, v.RecommendedID = &r, r.ConfigID
		}
	}
	onFront := map[int]bool{}
	for _, i := range Front(in.Cands, in.Metrics) {
		onFront[i] = true
		v.Front = append(v.Front, in.Cands[i])
	}
	slices.SortStableFunc(v.Front, func(a, b Candidate) int { return cmp.Compare(b.Score, a.Score) })
	for i, c := range in.Cands {
		marked := !in.Group && (c.ConfigID == v.DefaultConfigID || c.ConfigID == v.RecommendedID) // drawn with their own markers
		if !onFront[i] && !marked && c.Throughput.N > 0 {
			v.Others = append(v.Others, c)
		}
	}
	return v
}

// Chart is the front chart's data: the front, vLLM's default and the
// recommended config, the other measured configs, the SLO bounds on the
// two metrics and the verdict line.
func (v FrontView) Chart(title string, slo trial.SLO, m Metrics) chart.FrontData {
	d := chart.FrontData{Title: title, Throughput: m.Throughput, Latency: m.Latency, Gain: v.Verdict}
	var defCfg spaces.Config
	if v.Default != nil {
		defCfg = v.Default.Config
	}
	for _, c := range v.Front {
		d.Front = append(d.Front, ChartConfig(c, defCfg))
		d.VRAMEstimated = d.VRAMEstimated || c.VRAMEstimated
	}
	for _, c := range v.Others {
		d.Others = append(d.Others, ChartConfig(c, defCfg))
	}
	for _, c := range []struct {
		cand *Candidate
		dst  **chart.Config
	}{{v.Default, &d.Default}, {v.Recommended, &d.Recommended}} {
		if c.cand != nil {
			p := ChartConfig(*c.cand, defCfg)
			*c.dst = &p
			d.VRAMEstimated = d.VRAMEstimated || c.cand.VRAMEstimated
		}
	}
	for _, b := range slo {
		switch {
		case b.Metric == m.Latency && (b.Op == "<=" || b.Op == "<"):
			d.LatencyLimit = b.Limit
		case b.Metric == m.Throughput && (b.Op == ">=" || b.Op == ">"):
			d.ThroughputLimit = b.Limit
		}
	}
	return d
}

// ChartTitle is the title of a study's charts.
func ChartTitle(k store.StudyKey) string {
	return fmt.Sprintf("%s on %dx %s, %s, workload %s", ServedName(k), k.GPUCount, k.GPU, k.Engine, k.Workload)
}

// Recommendation is what `recommend --format json` prints (and the
// service answers): the pick, or feasible false and the closest config
// when nothing meets the SLOs.
type Recommendation struct {
	Feasible  bool       `json:"feasible"`
	Model     string     `json:"model"`
	GPU       string     `json:"gpu"`
	GPUCount  int        `json:"gpu_count"`
	Engine    string     `json:"engine"`
	Workload  string     `json:"workload"`
	Studies   []string   `json:"studies"`
	SLO       string     `json:"slo"`
	Prefer    Prefer     `json:"prefer"`
	Metrics   Metrics    `json:"metrics"`
	Candidate *Candidate `json:"candidate,omitempty"`
	// Closest is the config nearest to the SLOs when none meets them.
	Closest         *Candidate `json:"closest,omitempty"`
	DefaultConfigID string     `json:"default_config_id,omitempty"`
	IsDefault       bool       `json:"is_default"`
	// BestMeasured is the faster-looking config when vLLM's default is
	// recommended for want of a significant gain (Judge).
	BestMeasured *Candidate    `json:"best_measured,omitempty"`
	Gain         *GainEstimate `json:"gain,omitempty"`
	// Verdict is Judge's line, word for word what search's summary says.
	Verdict string   `json:"verdict"`
	Flags   []string `json:"flags,omitempty"`
	Command string   `json:"command,omitempty"`
	YAML    string   `json:"yaml,omitempty"`
	// EngineVersion is the vLLM version the YAML is for.
	EngineVersion string `json:"engine_version,omitempty"`
	yamlErr       error
	newest        string // the newest study, named in the YAML header
}

// RecommendInput is what Recommend judges: the selected studies (Newest
// names the setup), their trials in order and their candidates.
type RecommendInput struct {
	Studies []store.Study
	Newest  store.Study
	Trials  []store.Trial
	Cands   []Candidate
	SLO     trial.SLO
	Metrics Metrics
	Prefer  Prefer
	// Model is the name the user asked for: a study keyed by the catalog
	// name serves what the user calls it ("" = the study's).
	Model string
	// DefaultConfigID is vLLM's default config in Newest when the caller
	// knows it (DefaultConfigIDOf; "" = looked up here).
	DefaultConfigID string
}

// BuildRecommendation judges the measurements (Judge) and spells
// it out as flags, a vllm serve command and a --config YAML. When nothing
// meets the SLOs the error is an *InfeasibleError and the document names
// the closest config.
func BuildRecommendation(in RecommendInput) (Recommendation, error) {
	k := in.Newest.Key
	doc := Recommendation{Model: ServedName(k), GPU: k.GPU, GPUCount: k.GPUCount, Workload: k.Workload, Engine: k.Engine,
		SLO: in.SLO.String(), Prefer: in.Prefer, Metrics: in.Metrics, newest: in.Newest.ID}
	for _, st := range in.Studies {
		doc.Studies = append(doc.Studies, st.ID)
	}
	if in.Model != "" && k.ServedModel == "" {
		doc.Model = in.Model
	}
	doc.DefaultConfigID = in.DefaultConfigID
	if doc.DefaultConfigID == "" {
		doc.DefaultConfigID = DefaultConfigIDOf(in.Newest, in.Trials)
	}
	v := Judge(JudgeInput{Cands: in.Cands, DefaultID: doc.DefaultConfigID, Metrics: in.Metrics, SLO: in.SLO, Prefer: in.Prefer})
	doc.Verdict = v.Text
	best, err := v.Recommended()
	if err != nil {
		var inf *InfeasibleError
		if errors.As(err, &inf) {
			doc.Closest = inf.Closest
		}
		return doc, err
	}
	doc.Feasible, doc.Candidate = true, best
	doc.IsDefault, doc.BestMeasured, doc.Gain = v.IsDefault, v.BestMeasured, v.Gain
	serve := serveArgs(in.Trials, best.ConfigID)
	doc.Flags = slices.Concat(best.Config.Flags(), serve)
	doc.Command = ShellJoin(append([]string{"vllm", "serve", doc.Model}, doc.Flags...))
	// The YAML must mean the measured config on the study's vLLM: its
	// --config loader decides what a false boolean becomes.
	doc.EngineVersion = k.EngineVersion
	if doc.EngineVersion == "" {
		doc.EngineVersion = spaces.DefaultEngineVersion
	}
	doc.YAML, doc.yamlErr = best.Config.YAMLFor(doc.EngineVersion)
	if doc.yamlErr == nil && len(serve) > 0 {
		doc.YAML += "# and on the command line, what the workload's adapters need: " + ShellJoin(serve) + "\n"
	}
	return doc, nil
}

// YAMLErr is why the config has no --config YAML for its vLLM version.
func (r Recommendation) YAMLErr() error { return r.yamlErr }

// Format renders a feasible recommendation as `tuner recommend --format`
// does: flags, command or yaml (with its header), each ending in a newline.
func (r Recommendation) Format(format string) (string, error) {
	best := r.Candidate
	if best == nil {
		return "", errors.New("no recommendation")
	}
	switch format {
	case "flags":
		return ShellJoin(r.Flags) + "\n", nil
	case "command":
		return r.Command + "\n", nil
	case "yaml":
		if r.yamlErr != nil {
			return "", fmt.Errorf("--format yaml: %w; the measured config as a command line:\n%s", r.yamlErr, r.Command)
		}
		return fmt.Sprintf("# vllm serve %s --config this.yaml   (for vLLM %s)\n# config %s: %s %.1f (median of %d), %s %.2f ms, VRAM %s; study %s\n%s",
			r.Model, r.EngineVersion, best.ConfigID, r.Metrics.Throughput, best.Throughput.Median, best.Throughput.N, r.Metrics.Latency, best.Latency.Median,
			VRAMText(best.VRAM.Median, best.VRAMEstimated), r.newest, r.YAML), nil
	}
	return "", Usagef("--format %q: want flags, command, yaml or json", format)
}

// serveArgs are the engine arguments the trials of a config ran with beyond
// its flags (a workload's LoRA adapters), from its newest measured trial.
func serveArgs(trials []store.Trial, configID string) []string {
	for i := len(trials) - 1; i >= 0; i-- {
		if t := trials[i]; t.ConfigID == configID && t.Result != nil && len(t.Result.ServeArgs) > 0 {
			return t.Result.ServeArgs
		}
	}
	return nil
}

// VRAMText is a VRAM figure with an estimate spelled out.
func VRAMText(gib float64, estimated bool) string {
	if estimated {
		return fmt.Sprintf("%.1f GiB (estimated from --gpu-memory-utilization, not measured)", gib)
	}
	return fmt.Sprintf("%.1f GiB", gib)
}

// ShellJoin quotes arguments that need it for a POSIX shell.
func ShellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\r\n'\"\\$`*?[]{}()<>|&;#~!") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}
