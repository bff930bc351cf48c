package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// WorkloadTarget is a catalog model on GPUs that the workload evaluation
// serves every shipped workload on.
type WorkloadTarget struct {
	Model       string `json:"model"`
	GPU         string `json:"gpu"`
	GPUCount    int    `json:"gpu_count"`
	MaxModelLen int    `json:"max_model_len"`
}

func (t WorkloadTarget) String() string {
	return fmt.Sprintf("%s on %dx %s", t.Model, max(1, t.GPUCount), t.GPU)
}

// DefaultWorkloadTargets are small to mid-size targets whose default
// configs serve every shipped workload (8192-token prompts included).
func DefaultWorkloadTargets() []WorkloadTarget {
	return []WorkloadTarget{
		{Model: "Llama-3.1-8B", GPU: "H100-80GB", GPUCount: 1, MaxModelLen: 16384},
		{Model: "Llama-3.1-8B", GPU: "A100-80GB", GPUCount: 1, MaxModelLen: 16384},
		{Model: "Qwen2.5-7B", GPU: "L40S-48GB", GPUCount: 1, MaxModelLen: 16384},
	}
}

// WorkloadEvalConfig configures MeasureWorkloads.
type WorkloadEvalConfig struct {
	// SimBin is the vllm-sim executable the trial runner starts (the real
	// process path: HTTP, the load generator, the stability checks).
	SimBin    string
	Targets   []WorkloadTarget
	Workloads []string // shipped workload names (default: all of trial.BuiltinWorkloads)
	// TimeScale is the simulator's real seconds per simulated second.
	TimeScale float64
	LogDir    string
	Logger    *slog.Logger
	Progress  io.Writer
}

// WorkloadRow is one trial of one workload on one target (the target's
// default config).
type WorkloadRow struct {
	Workload string `json:"workload"`
	Target   string `json:"target"`
	Status   string `json:"status"`
	// CI is the relative 95% half-width of the primary level's throughput.
	CI           float64 `json:"ci_half_width"`
	EarlyStopped bool    `json:"early_stopped"`
	Extended     int     `json:"extended"`
	Levels       int     `json:"levels"`
	Requests     int     `json:"requests"`
	// MeasureS is the measurement's duration in simulated seconds (the
	// wall time over the time scale): what it would take on the GPU.
	MeasureS        float64 `json:"measure_s"`
	OutputTokS      float64 `json:"output_tok_s"`
	Reason          string  `json:"reason,omitempty"`
	WallS           float64 `json:"wall_s"`
	PrimaryRequests int     `json:"primary_requests"`
}

// WorkloadReport is the outcome of MeasureWorkloads.
type WorkloadReport struct {
	TimeScale float64       `json:"time_scale"`
	Rows      []WorkloadRow `json:"rows"`
}

// MeasureWorkloads runs every shipped workload on every target's default
// config through the live trial runner on vllm-sim and reports each
// trial's verdict, throughput CI, early stop and duration.
func MeasureWorkloads(ctx context.Context, c WorkloadEvalConfig) (WorkloadReport, error) {
	rep := WorkloadReport{TimeScale: c.TimeScale}
	if !(c.TimeScale > 0) {
		return rep, fmt.Errorf("%w: time scale %v: want > 0", ErrConfig, c.TimeScale)
	}
	names := c.Workloads
	if len(names) == 0 {
		names = trial.BuiltinWorkloads()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	// Everything is checked before the first engine starts.
	var ws []trial.Workload
	for _, name := range names {
		w, err := trial.LoadWorkload(name)
		if err != nil {
			return rep, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		ws = append(ws, w)
	}
	base, err := spaces.Default()
	if err != nil {
		return rep, err
	}
	cat := spaces.DefaultCatalog()
	var targets []spaces.Target
	var defaults []spaces.Config
	for _, tg := range c.Targets {
		t, err := cat.Target(tg.Model, tg.GPU, tg.GPUCount)
		if err != nil {
			return rep, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		t.MaxModelLen, t.EngineVersion = tg.MaxModelLen, spaces.DefaultEngineVersion
		sp, err := base.Resolve(t)
		if err != nil {
			return rep, fmt.Errorf("%w: %s: %v", ErrConfig, tg, err)
		}
		targets, defaults = append(targets, t), append(defaults, sp.DefaultConfig())
	}
	if c.SimBin == "" {
		return rep, fmt.Errorf("%w: no vllm-sim executable", ErrConfig)
	}
	for i, tg := range c.Targets {
		if err := measureTarget(ctx, c, targets[i], tg.String(), defaults[i], ws, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// measureTarget runs every workload on cfg on one target, one engine start
// per trial.
func measureTarget(ctx context.Context, c WorkloadEvalConfig, t spaces.Target, name string, cfg spaces.Config, ws []trial.Workload, rep *WorkloadReport) error {
	rc := trial.DefaultConfig()
	rc.Command = []string{c.SimBin, "serve", t.Model.Name, "--gpu", t.GPU.Name, "--gpu-count", fmt.Sprint(max(1, t.GPUCount))}
	rc.ExtraArgs = []string{"--startup-scale", "0.01", "--time-scale", fmt.Sprint(c.TimeScale)}
	rc.LogDir, rc.RunDir, rc.Telemetry, rc.Logger = c.LogDir, "-", "engine", c.Logger
	rc.StartupTimeout, rc.StopGrace = time.Minute, 5*time.Second
	r, err := trial.NewRunner(rc)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, w := range ws {
		fmt.Fprintf(c.Progress, "%s, %s ...", w.Name, name)
		t0 := time.Now()
		res, err := r.Run(ctx, cfg, w)
		if err != nil {
			return fmt.Errorf("%s on %s: %w", w.Name, name, err)
		}
		row := WorkloadRow{Workload: w.Name, Target: name, Status: (&res).String(), Levels: len(res.Levels),
			MeasureS: res.Phases.MeasureS / c.TimeScale, WallS: time.Since(t0).Seconds(),
			CI: res.Stability.CIHalfWidth, EarlyStopped: res.Stability.EarlyStopped,
			Extended: res.Stability.Extended, Reason: res.Stability.Reason}
		if m := res.Metrics(); m != nil {
			row.OutputTokS = m.OutputThroughput
			row.PrimaryRequests = m.Completed + m.Failed
		}
		for _, l := range res.Levels {
			row.Requests += l.Metrics.Completed + l.Metrics.Failed
		}
		if res.Status == trial.StatusFailed {
			row.Reason = res.Error
		}
		fmt.Fprintf(c.Progress, " %s, CI %.1f%%, %.1f s\n", row.Status, 100*row.CI, row.MeasureS)
		rep.Rows = append(rep.Rows, row)
	}
	return nil
}

// WriteWorkloadEval writes the per-trial rows and, per workload, the
// median measurement duration and how many trials were ok with a CI
// within 2% and stopped early.
func WriteWorkloadEval(w io.Writer, rep WorkloadReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | target | verdict | throughput CI | early stop | extended | levels | requests | measure s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f%% | %v | %d | %d | %d | %.1f |\n", r.Workload, r.Target, r.Status,
			100*r.CI, r.EarlyStopped, r.Extended, r.Levels, r.Requests, r.MeasureS)
	}
	fmt.Fprintf(&b, "\n| workload | ok with CI <= 2%% | stopped early | median measure s |\n|---|---|---|---|\n")
	var order []string
	by := map[string][]WorkloadRow{}
	for _, r := range rep.Rows {
		if _, ok := by[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		by[r.Workload] = append(by[r.Workload], r)
	}
	for _, name := range order {
		rows := by[name]
		var d []float64
		ok, early := 0, 0
		for _, r := range rows {
			d = append(d, r.MeasureS)
			if r.Status == string(trial.StatusOK) && r.CI <= 0.02 {
				ok++
			}
			if r.EarlyStopped {
				early++
			}
		}
		fmt.Fprintf(&b, "| %s | %d/%d | %d/%d | %.1f |\n", name, ok, len(rows), early, len(rows), trial.Median(d))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
