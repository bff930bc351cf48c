package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbcopy"
	"github.com/vllm-tuner/tuner/store/dbopen"
)

func dbMigrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "migrate",
		Usage:     "apply pending schema migrations (opening for writing applies them too)",
		ArgsUsage: " ",
		Action:    dbMigrate,
	}
}

func dbCopyCommand() *cli.Command {
	return &cli.Command{
		Name:      "copy",
		Usage:     "copy everything between databases (studies with their trials, models, benchmark runs, the service's jobs and schedules): a bbolt file or a postgres:// URL each",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Required: true, Usage: "source database (file or postgres:// URL)"},
			&cli.StringFlag{Name: "to", Required: true, Usage: "target database (file or postgres:// URL); studies already there with trials, and jobs or schedules whose ID or name is taken, are refused"},
		},
		Action: dbCopy,
	}
}

func dbMigrate(c *cli.Context) error {
	db, err := dbArg(c)
	if err != nil {
		return err
	}
	s, err := dbopen.Open(c.Context, db, dbopen.Options{Logger: cmdLogger(c)})
	if err != nil {
		return err
	}
	defer s.Close()
	v, err := s.Migrate(c.Context)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "ok: %s: schema %d\n", s.Path(), v)
	return nil
}

func openCopyEnd(ctx context.Context, db string, readOnly bool) (store.DB, error) {
	return dbopen.Open(ctx, db, dbopen.Options{ReadOnly: readOnly})
}

func dbCopy(c *cli.Context) error {
	if c.String("from") == c.String("to") {
		return usagef("db copy: --from and --to are the same database")
	}
	src, err := openCopyEnd(c.Context, c.String("from"), true)
	if errors.Is(err, store.ErrNotFound) {
		return notFoundError("db copy: no database at --from")
	}
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openCopyEnd(c.Context, c.String("to"), false)
	if err != nil {
		return err
	}
	defer dst.Close()
	n, err := dbcopy.Copy(c.Context, dst, src)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "copied %d studies (%d trials), %d models, %d benchmark runs, %d jobs and %d schedules from %s to %s\n",
		n.Studies, n.Trials, n.Models, n.Runs, n.Jobs, n.Schedules, src.Path(), dst.Path())
	return nil
}
