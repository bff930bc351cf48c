package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/eval"
)

// withEvalCompare adds `eval compare` to the eval command.
func withEvalCompare(c *cli.Command) *cli.Command {
	c.Subcommands = append(c.Subcommands, &cli.Command{
		Name:  "compare",
		Usage: "judge a search change: two eval search reports compared seed by seed",
		Description: "Reads two `tuner eval search` reports (report.json or its directory) of the same scenarios and seeds,\n" +
			"BASE before a change and NEW after it, and pairs each strategy's runs seed by seed: for every HV checkpoint\n" +
			"both measured (HV@8, HV@16, HV@24) and the pick (true throughput over the true best), the mean of\n" +
			"NEW - BASE with its standard error, the paired t-test's p-value and how many seeds got better or worse,\n" +
			"per scenario and over all scenarios' seeds. A scenario's seeds spread widely, so compare these rather\n" +
			"than the two tables' medians.",
		ArgsUsage: "BASE NEW",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the rows as JSON instead of Markdown"}},
		Action:    runEvalCompare,
	})
	return c
}

func runEvalCompare(c *cli.Context) error {
	if c.NArg() != 2 {
		return usagef("eval compare takes two reports, BASE and NEW; got %d arguments", c.NArg())
	}
	base, err := eval.ReadReport(c.Args().Get(0))
	if err != nil {
		return asUsage(err)
	}
	cur, err := eval.ReadReport(c.Args().Get(1))
	if err != nil {
		return asUsage(err)
	}
	rows, err := eval.Compare(base, cur)
	return writeEvalReport(c, err, rows, func(w io.Writer) error {
		_, err := io.WriteString(w, eval.CompareMarkdown(rows))
		return err
	})
}
