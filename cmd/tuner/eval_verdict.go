package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/eval"
	"github.com/vllm-tuner/tuner/tuner"
)

// withEvalVerdict adds `eval verdict` to the eval command.
func withEvalVerdict(c *cli.Command) *cli.Command {
	c.Subcommands = append(c.Subcommands, &cli.Command{
		Name:  "verdict",
		Usage: "count search verdicts on a simulated host that ignores every flag (false gains) and on one with a real gain",
		Description: "Runs `tuner search --engine sim-virtual` once per seed and condition on a simulated host whose\n" +
			"speed drifts (--drift over --drift-period) and that ignores every tuning flag: once with no config\n" +
			"faster than vLLM's default (every \"significant gain\" is false; the goal is none), and once per\n" +
			"--speedup with every non-default config that much faster (how often the gain is found). Prints a\n" +
			"Markdown report (or --json) and writes verdict.md and verdict.json under --out.",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "seeds", Value: 10, Usage: "searches per condition"},
			&cli.Float64SliceFlag{Name: "speedup", Value: cli.NewFloat64Slice(1.05), Usage: "real gains of every non-default config for the power rows"},
			&cli.StringFlag{Name: "model", Value: "Llama-3.1-8B", Usage: "simulated model"},
			&cli.StringFlag{Name: "gpu", Value: "H100", Usage: "simulated GPU"},
			&cli.StringFlag{Name: "workload", Value: "short-high-concurrency", Usage: "workload of every search"},
			&cli.StringFlag{Name: "slo", Value: "tpot_p99<=200ms", Usage: "SLO of every search"},
			&cli.IntFlag{Name: "trials", Value: 10, Usage: "search trials per search"},
			&cli.IntFlag{Name: "finalists", Value: 3, Usage: "configs re-measured with vLLM's default"},
			&cli.IntFlag{Name: "repeats", Value: 3, Usage: "interleaved rounds of the re-measurement"},
			&cli.Float64Flag{Name: "drift", Value: 0.05, Usage: "the host's speed drift (std of log speed)"},
			&cli.Float64Flag{Name: "drift-period", Value: 600, Usage: "simulated seconds over which the drift moves by about --drift"},
			&cli.StringFlag{Name: "out", Value: "eval-out", Usage: "report directory (verdict.md, verdict.json)"},
			&cli.BoolFlag{Name: "json", Usage: "JSON"},
		},
		Action: runEvalVerdict,
	})
	return c
}

func runEvalVerdict(c *cli.Context) error {
	if c.Int("seeds") < 1 {
		return usagef("--seeds %d: want at least 1", c.Int("seeds"))
	}
	conds := []eval.VerdictCondition{{Name: "flags ignored", Speedup: 1}}
	for _, s := range c.Float64Slice("speedup") {
		if !(s > 1) {
			return usagef("--speedup %v: want > 1", s)
		}
		conds = append(conds, eval.VerdictCondition{Name: fmt.Sprintf("non-default %s faster", pctText(s)), Speedup: s})
	}
	dir, err := os.MkdirTemp("", "tuner-eval-verdict-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	search := func(ctx context.Context, cond eval.VerdictCondition, seed uint64) (tuner.Report, error) {
		db := filepath.Join(dir, fmt.Sprintf("s%g-%d.db", cond.Speedup, seed))
		args := []string{"tuner", "--db", db, "search", "--model", c.String("model"), "--gpu", c.String("gpu"),
			"--engine", "sim-virtual", "--workload", c.String("workload"), "--slo", c.String("slo"), "--budget", "0",
			"--trials", strconv.Itoa(c.Int("trials")), "--finalists", strconv.Itoa(c.Int("finalists")),
			"--repeats", strconv.Itoa(c.Int("repeats")), "--seed", strconv.FormatUint(seed, 10), "--json",
			"--engine-arg", "--ignore-tuning-flags",
			"--engine-arg", "--tuned-speedup=" + strconv.FormatFloat(cond.Speedup, 'g', -1, 64),
			"--engine-arg", "--drift=" + strconv.FormatFloat(c.Float64("drift"), 'g', -1, 64),
			"--engine-arg", "--drift-period=" + strconv.FormatFloat(c.Float64("drift-period"), 'g', -1, 64),
			"--engine-arg", "--drift-seed=" + strconv.FormatUint(seed, 10)}
		var out, errb bytes.Buffer
		if code := run(ctx, args, &out, &errb); code != 0 {
			return tuner.Report{}, fmt.Errorf("search exited %d: %s", code, lastLines(errb.String(), 5))
		}
		var rep tuner.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return rep, fmt.Errorf("search report: %w", err)
		}
		return rep, nil
	}
	rep, err := eval.MeasureVerdicts(c.Context, eval.VerdictEvalConfig{Conditions: conds, Seeds: c.Int("seeds"), Search: search, Progress: c.App.ErrWriter})
	if err != nil {
		return err
	}
	title := fmt.Sprintf("search verdicts on simulated %s / %s, workload %s, SLO %s: %d trials, %d finalists, %d rounds; host drift %g over %g s, every tuning flag ignored\n\n",
		c.String("model"), c.String("gpu"), c.String("workload"), c.String("slo"), c.Int("trials"), c.Int("finalists"), c.Int("repeats"), c.Float64("drift"), c.Float64("drift-period"))
	var md bytes.Buffer
	md.WriteString(title)
	if err := eval.WriteVerdictEval(&md, rep); err != nil {
		return err
	}
	if out := c.String("out"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		js, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "verdict.json"), append(js, '\n'), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "verdict.md"), md.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return writeEvalReport(c, nil, rep, func(w io.Writer) error {
		_, err := w.Write(md.Bytes())
		return err
	})
}

// pctText is a speedup as a percentage: 1.05 -> "5%".
func pctText(s float64) string {
	return strconv.FormatFloat((s-1)*100, 'g', 3, 64) + "%"
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimRight([]byte(s), "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
