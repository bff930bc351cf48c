package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(workerCommand()) }

func workerCommand() *cli.Command {
	sc := searchCommand()
	return &cli.Command{
		Name:      "worker",
		Usage:     "serve a study in PostgreSQL together with other workers (other machines)",
		ArgsUsage: " ",
		Description: "Joins study ID of the postgres:// --db and runs its trials, each leased, until the study is done.\n" +
			"With only --study the spec the study's first worker recorded is used; with search options they must\n" +
			"give the same study (model, GPU, engine, workload, objectives, SLO, space), else the differences are named.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "study", Required: true, Usage: "the study `ID` to join"},
		}, sc.Flags...),
		Action: runWorker,
	}
}

func runWorker(c *cli.Context) error {
	db, err := dbArg(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return usagef("worker: --dry-run is for tuner search")
	}
	id := c.String("study")
	st, err := openSearchDB(c.Context, db, cmdLogger(c))
	if err != nil {
		return err
	}
	defer st.Close()
	var spec tuner.SearchSpec
	if c.IsSet("model") {
		if spec, err = searchSpec(c); err != nil {
			return err
		}
	} else {
		blob, err := st.StudySpec(c.Context, id)
		if errors.Is(err, store.ErrNotFound) {
			return usagef("worker: %v: pass the search options", err)
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(blob, &spec); err != nil {
			return fmt.Errorf("study %s: recorded spec: %w", id, err)
		}
		spec.Worker, spec.Lease = c.String("worker-name"), tuner.Duration(c.Duration("lease"))
	}
	spec.Resume = true // a worker joins the study as it is
	ss, err := spec.Resolve()
	if err != nil {
		return err
	}
	if err := tuner.CheckJoin(c.Context, st, id, ss.Key); err != nil {
		return err
	}
	return startSearch(c, ss, st, db, true)
}
