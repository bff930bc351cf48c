package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(spaceCommand()) }

// targetFlags are shared by every command that resolves a space for a model
// on a GPU.
func targetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model name or HF id (see the catalog)"},
		&cli.StringFlag{Name: "gpu", Aliases: []string{"g"}, Usage: "GPU type, e.g. H100-80GB"},
		&cli.IntFlag{Name: "gpus", Value: 1, Usage: "GPUs available to one engine"},
		&cli.IntFlag{Name: "max-model-len", Usage: "max_model_len to fix (default: the model's maximum)"},
		&cli.StringFlag{Name: "engine-version", Usage: "vLLM version the flags are for (default: detected, else " + spaces.DefaultEngineVersion + ")"},
		&cli.StringFlag{Name: "profiles", Usage: "YAML file of extra GPU/model profiles"},
	}
}

// loadSpace reads --space/--file (or the embedded default); bad files are
// usage errors.
var loadSpace = tuner.LoadSpace

// targetSpec reads the target flags.
func targetSpec(c *cli.Context) (tuner.TargetSpec, error) {
	ts := tuner.TargetSpec{
		Model: c.String("model"), GPU: c.String("gpu"), GPUs: c.Int("gpus"),
		EngineVersion: c.String("engine-version"), Profiles: c.String("profiles"),
		DetectGPU: detectGPU, Notes: c.App.ErrWriter,
	}
	if c.IsSet("max-model-len") {
		n := c.Int("max-model-len")
		ts.MaxModelLen = &n
	}
	return ts, nil
}

// resolveTarget turns the target flags into a spaces.Target; ok is false
// when neither --model nor --gpu was given.
func resolveTarget(c *cli.Context) (spaces.Target, bool, error) {
	ts, err := targetSpec(c)
	if err != nil {
		return spaces.Target{}, false, err
	}
	return ts.ResolveTarget()
}

// detectGPU names the first GPU NVML sees (its name is a catalog alias,
// e.g. "NVIDIA H100 80GB HBM3").
func detectGPU() (string, error) {
	src, err := trial.OpenNVML()
	if err != nil {
		return "", fmt.Errorf("no GPU detected (%w)", err)
	}
	defer src.Close()
	id, err := src.Identity()
	if err != nil || id.Name == "" {
		return "", fmt.Errorf("no GPU name from NVML (%v)", err)
	}
	return id.Name, nil
}

func spaceCommand() *cli.Command {
	return &cli.Command{
		Name:  "space",
		Usage: "print the effective search space (default vLLM space, or a user file on top of it)",
		Description: "Without --model/--gpu the generic space is shown, with vLLM's GPU-dependent defaults spelled out.\n" +
			"With them, the space is resolved: defaults evaluated, flags the engine version lacks dropped,\n" +
			"impossible levels (e.g. TP sizes) removed, and the pruning a new search for that model and GPU\n" +
			"would apply is shown: static memory facts plus the history in the database (--db), with the\n" +
			"original and pruned ranges, the fraction of the volume removed and the reason per parameter.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"space"}, Usage: "user space file (YAML) applied on top of the default"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
			&cli.BoolFlag{Name: "all", Usage: "also list known flags that are not tuned"},
			&cli.StringFlag{Name: "slo", Usage: "SLO bounds the history is judged by when pruning, e.g. 'ttft_p99<=500ms'"},
			&cli.StringFlag{Name: "latency", Value: "tpot_p99", Usage: "latency objective the history is judged by: ttft_p99, tpot_p99, itl_p99 or e2el_p99"},
			&cli.BoolFlag{Name: "no-prune", Usage: "show the resolved space only, without the pruning a new search would apply"},
			&cli.StringFlag{Name: "workload", Aliases: []string{"w"}, Usage: "workload (built-in name or YAML) whose LoRA tenants put the adapter slots into the space"},
		}, targetFlags()...),
		Action: func(c *cli.Context) error {
			ts, err := targetSpec(c)
			if err != nil {
				return err
			}
			q := tuner.SpaceQuery{Target: ts, File: c.String("file"), Workload: c.String("workload"), SLO: c.String("slo"), Latency: c.String("latency"), NoPrune: c.Bool("no-prune")}
			var db store.DB
			if (ts.Model != "" || ts.GPU != "") && !q.NoPrune {
				// The history of the database, if there is one yet.
				path, err := dbArg(c)
				if err != nil {
					return err
				}
				st, err := dbopen.Open(c.Context, path, dbopen.Options{ReadOnly: true})
				switch {
				case errors.Is(err, store.ErrNotFound) || errors.Is(err, os.ErrNotExist):
				case err != nil:
					return err
				default:
					defer st.Close()
					db = st
				}
			}
			rep, err := q.Space(c.Context, db)
			if err != nil {
				return err
			}
			if rep.Pruning == nil { // generic: no target
				if c.Bool("json") {
					return writeJSON(c.App.Writer, rep.Space)
				}
				return printSpace(c.App.Writer, rep.Space, c.Bool("all"))
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, rep)
			}
			if err := printSpace(c.App.Writer, rep.Space, c.Bool("all")); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "\na new search on this model and GPU (%d trials of history in the database):\n", rep.History)
			printPrune(c.App.Writer, *rep.Pruning)
			return nil
		},
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSpace(w io.Writer, s *spaces.Space, all bool) error {
	if t := s.Target(); t != nil {
		fmt.Fprintf(w, "space: %s, resolved for %s\n\n", s.Source, t.Describe())
	} else {
		fmt.Fprintf(w, "space: %s (generic; pass --model and --gpu to resolve)\n\n", s.Source)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFLAG\tKIND\tRANGE\tDEFAULT\tSTATUS")
	for i := range s.Params {
		p := &s.Params[i]
		status := "tuned"
		switch {
		case p.Fixed != nil:
			status = "fixed=" + p.Fixed.String()
		case !p.Tune:
			status = "known"
		}
		if !all && status == "known" {
			continue
		}
		if p.Until != "" {
			status += " (<" + p.Until + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Flag(), p.Kind, p.RangeString(), defaultString(p), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nconstraints:")
	for _, k := range s.Constraints {
		fmt.Fprintf(w, "  %-26s %s\n", k.Name, k.Src)
	}
	return nil
}

// defaultString shows a resolved default, or the rules of a generic one.
func defaultString(p *spaces.Param) string {
	var parts []string
	if !p.Default.IsZero() {
		parts = append(parts, p.Default.String())
	}
	for _, r := range p.Rules {
		v := p.Default.String()
		if r.Expr != nil {
			v = r.Expr.String()
		} else if !r.Value.IsZero() {
			v = r.Value.String()
		}
		if r.When != nil {
			v += " if " + r.When.String()
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, "; ")
}
