package main

import (
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/tuner"
)

// The release report is a bench subcommand; bench.go's init has run (files
// initialise in name order).
func init() {
	for _, c := range commands {
		if c.Name == "bench" {
			c.Subcommands = append(c.Subcommands, benchReportCommand())
		}
	}
}

func benchReportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "one report across models for a tier: each model's newest run against its previous one, side by side, with the gate's verdict",
		Description: "For every model with a finished run of --tier (default release): its newest run and the previous one of the\n" +
			"same tier, each cell at capacity (the highest load meeting the SLO): the load, output tokens/s, TTFT and TPOT\n" +
			"p99, with the change; the engine versions of both; and the regression gate's verdict on the two runs (the\n" +
			"gate flags as bench compare takes them). Markdown (default), --json, or --html: one offline page with an\n" +
			"interactive chart (nothing fetched).",
		Flags: append(gateFlags(),
			&cli.StringFlag{Name: "tier", Value: "release", Usage: "tier of the runs"},
			&cli.BoolFlag{Name: "json", Usage: "JSON"},
			&cli.BoolFlag{Name: "html", Usage: "an offline HTML page"},
			&cli.StringFlag{Name: "out", Usage: "write to this file instead of standard output"},
		),
		Action: func(c *cli.Context) error {
			if c.Bool("json") && c.Bool("html") {
				return usagef("--json and --html exclude each other")
			}
			if _, err := gateConfig(c); err != nil {
				return err
			}
			st, err := openReader(c)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := tuner.Release(c.Context, st, tuner.ReleaseSpec{Tier: c.String("tier"), Gate: gateSpec(c), Now: time.Now()})
			if err != nil {
				return err
			}
			write := func(w io.Writer) error {
				switch {
				case c.Bool("json"):
					return writeJSON(w, rep)
				case c.Bool("html"):
					return rep.WriteHTML(w)
				}
				return rep.WriteMarkdown(w)
			}
			return writeOutput(c.App.Writer, c.String("out"), write)
		},
	}
}
