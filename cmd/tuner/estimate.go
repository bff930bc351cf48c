package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
)

func init() { register(estimateCommand()) }

// estimateLabel heads every estimate: it is the simulator's model, not a
// measurement.
const estimateLabel = "ESTIMATE from the simulator's calibrated model at vLLM's defaults (no trial ran; measure before you rely on it)"

func estimateCommand() *cli.Command {
	return &cli.Command{
		Name:  "estimate",
		Usage: "before any trial: what fits (weights, KV cache, concurrency) and a throughput/latency envelope per GPU and TP size",
		Description: "For each GPU type (--gpu, repeated or comma-separated) and each tensor-parallel size up to --gpus that\n" +
			"divides the model's heads: the memory vLLM's startup accounting gives at its defaults (weights and KV\n" +
			"cache per GPU, KV tokens, how many max_model_len requests and how many --input-len+--output-len requests\n" +
			"the cache holds), or why it does not fit; and the simulator's calibrated serving model for one request at\n" +
			"a time (the latency floor) and for the largest batch the engine admits (the throughput ceiling). An estimate,\n" +
			"labelled so: the simulator's model of vLLM, not a measurement.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model name or HF id (see the catalog)"},
			&cli.StringSliceFlag{Name: "gpu", Aliases: []string{"g"}, Usage: "GPU type(s), e.g. H100-80GB,A100-80GB"},
			&cli.IntFlag{Name: "gpus", Value: 1, Usage: "GPUs available to one engine (TP sizes up to it are tried)"},
			&cli.IntFlag{Name: "max-model-len", Usage: "context length (default: the model's maximum)"},
			&cli.IntFlag{Name: "input-len", Value: 1024, Usage: "prompt tokens of the envelope's requests"},
			&cli.IntFlag{Name: "output-len", Value: 256, Usage: "output tokens of the envelope's requests"},
			&cli.StringFlag{Name: "engine-version", Usage: "vLLM version (default " + spaces.DefaultEngineVersion + ")"},
			&cli.StringFlag{Name: "profiles", Usage: "YAML file of extra GPU/model profiles"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		},
		Action: func(c *cli.Context) error {
			var gpus []string
			for _, g := range c.StringSlice("gpu") {
				for _, s := range strings.Split(g, ",") {
					if s = strings.TrimSpace(s); s != "" {
						gpus = append(gpus, s)
					}
				}
			}
			if c.String("model") == "" || len(gpus) == 0 {
				return usagef("estimate needs --model and --gpu")
			}
			var rows []sim.Estimate
			for _, g := range gpus {
				ts, err := targetSpec(c)
				if err != nil {
					return err
				}
				ts.GPU, ts.DetectGPU = g, nil
				t, _, err := ts.ResolveTarget()
				if err != nil {
					return err
				}
				est, err := sim.EstimateTarget(c.Context, sim.EstimateConfig{Target: t, InputLen: c.Int("input-len"), OutputLen: c.Int("output-len")})
				if errors.Is(err, sim.ErrEstimateInput) {
					return usagef("%v", err)
				}
				if err != nil {
					return err
				}
				rows = append(rows, est...)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, struct {
					Estimate  bool           `json:"estimate"`
					Note      string         `json:"note"`
					InputLen  int            `json:"input_len"`
					OutputLen int            `json:"output_len"`
					Rows      []sim.Estimate `json:"rows"`
				}{true, estimateLabel, c.Int("input-len"), c.Int("output-len"), rows})
			}
			return printEstimate(c.App.Writer, rows, c.Int("input-len"), c.Int("output-len"))
		},
	}
}

func printEstimate(w io.Writer, rows []sim.Estimate, in, out int) error {
	fmt.Fprintf(w, "%s\n%s, requests of %d+%d tokens\n\n", estimateLabel, rows[0].Model, in, out)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tTP\tFITS\tWEIGHTS GiB/GPU\tKV GiB/GPU\tKV TOKENS\tMAX CONC @LEN\tCONC @REQ\t1 REQ: TTFT ms\tTPOT ms\ttok/s\tPEAK: CONC\ttok/s\tTPOT p99 ms")
	var notes []string
	for _, r := range rows {
		if !r.Fits {
			fmt.Fprintf(tw, "%s\t%d\tno\t%.1f\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", r.GPU, r.TP, r.WeightsGiB)
			notes = append(notes, fmt.Sprintf("%s TP %d: %s", r.GPU, r.TP, r.Reason))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\tyes\t%.1f\t%.1f\t%d\t%.1f @%d\t%.1f\t%.1f\t%.2f\t%.1f\t%d\t%.0f\t%.2f\n", r.GPU, r.TP, r.WeightsGiB, r.KVGiB, r.KVTokens,
			r.MaxConcurrency, r.MaxModelLen, r.ConcurrencyAtRequest, r.Single.TTFTP50MS, r.Single.TPOTP50MS, r.Single.OutputTokS,
			r.Peak.Concurrency, r.Peak.OutputTokS, r.Peak.TPOTP99MS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(w, "does not fit: %s\n", n)
	}
	return nil
}
