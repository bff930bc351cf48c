package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/eval"
)

// withEvalWorkloads adds `eval workloads` to the eval command.
func withEvalWorkloads(c *cli.Command) *cli.Command {
	c.Subcommands = append(c.Subcommands, &cli.Command{
		Name:  "workloads",
		Usage: "measure the shipped workloads on vllm-sim: verdict, throughput CI, early stop and trial duration",
		Description: "Runs every shipped workload (or --workloads) on the default config of each target through the\n" +
			"live trial runner and a vllm-sim process at --time-scale, and prints one row per trial and, per\n" +
			"workload, how many trials were ok with a throughput CI within 2%, stopped early, and the median\n" +
			"measurement duration in simulated seconds.",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "workloads", Usage: "comma-separated shipped workloads (default: all)"},
			&cli.StringSliceFlag{Name: "target", Usage: "MODEL:GPU[:GPUS] (repeatable; default: Llama-3.1-8B on H100 and A100, Qwen2.5-7B on L40S)"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "the simulator's real seconds per simulated second"},
			&cli.StringFlag{Name: "vllm-sim", Usage: "vllm-sim executable (default: next to tuner, then on PATH)"},
			&cli.StringFlag{Name: "log-dir", Usage: "keep the engine logs and raw per-request data here (default: a temporary directory, removed)"},
			&cli.BoolFlag{Name: "json", Usage: "JSON"},
		},
		Action: runEvalWorkloads,
	})
	return c
}

func runEvalWorkloads(c *cli.Context) error {
	bin, err := findVLLMSim(c.String("vllm-sim"))
	if err != nil {
		return err
	}
	cfg := eval.WorkloadEvalConfig{SimBin: bin, Targets: eval.DefaultWorkloadTargets(), TimeScale: c.Float64("time-scale"),
		Progress: c.App.ErrWriter, Logger: cmdLogger(c)}
	if v := c.String("workloads"); v != "" {
		cfg.Workloads = splitList(v)
	}
	if ts := c.StringSlice("target"); len(ts) > 0 {
		cfg.Targets = nil
		for _, s := range ts {
			t, err := parseWorkloadTarget(s)
			if err != nil {
				return err
			}
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	cfg.LogDir = c.String("log-dir")
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "tuner-eval-workloads-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.LogDir = dir
	}
	rep, err := eval.MeasureWorkloads(c.Context, cfg)
	return writeEvalReport(c, err, rep, func(w io.Writer) error {
		fmt.Fprintf(w, "shipped workloads on vllm-sim, time scale %s (real seconds per simulated second)\n\n", strconv.FormatFloat(cfg.TimeScale, 'g', -1, 64))
		return eval.WriteWorkloadEval(w, rep)
	})
}

// parseWorkloadTarget reads MODEL:GPU[:GPUS].
func parseWorkloadTarget(s string) (eval.WorkloadTarget, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return eval.WorkloadTarget{}, usagef("--target %q: want MODEL:GPU[:GPUS]", s)
	}
	t := eval.WorkloadTarget{Model: parts[0], GPU: parts[1], GPUCount: 1, MaxModelLen: 16384}
	if len(parts) == 3 {
		n, err := strconv.Atoi(parts[2])
		if err != nil || n < 1 {
			return t, usagef("--target %q: GPUS %q: want a positive integer", s, parts[2])
		}
		t.GPUCount = n
	}
	return t, nil
}
