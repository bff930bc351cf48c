package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/trial"
)

func init() { register(dbCommand()) }

func dbCommand() *cli.Command {
	return &cli.Command{
		Name:  "db",
		Usage: "check, back up, export, migrate or copy the database",
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "verify the database (a bbolt file: its page check; both backends: tuner's invariants) and list engines left running",
				ArgsUsage: " ",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"}},
				Action:    dbCheck,
			},
			{
				Name:      "backup",
				Usage:     "write a consistent copy of the database to PATH (atomically replaced)",
				ArgsUsage: "PATH",
				Action:    dbBackup,
			},
			{
				Name:      "export",
				Usage:     "export trials as CSV or JSON lines",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "format", Value: "csv", Usage: "csv or jsonl"},
					&cli.StringFlag{Name: "study", Usage: "only this study ID"},
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (default stdout)"},
				},
				Action: dbExport,
			},
			dbMigrateCommand(),
			dbCopyCommand(),
		},
	}
}

// openDB opens the database read-only for a db subcommand.
func openDB(c *cli.Context) (store.DB, error) {
	path, err := dbArg(c)
	if err != nil {
		return nil, err
	}
	return dbopen.Open(c.Context, path, dbopen.Options{ReadOnly: true})
}

// dbCheck is `tuner db check` on either backend: store.DB's Check, and the
// engine groups still alive that log into this database's directories.
func dbCheck(c *cli.Context) error {
	db, err := dbArg(c)
	if err != nil {
		return err
	}
	s, err := dbopen.Open(c.Context, db, dbopen.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	rep, err := s.Check(c.Context)
	engines := liveEngines(c, s, dataDir(db))
	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		out := struct {
			store.CheckReport
			Engines []trial.StaleEngine `json:"engines,omitempty"`
		}{rep, engines}
		if jerr := enc.Encode(out); jerr != nil {
			return jerr
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "problem: %s\n", p)
		}
		for _, d := range rep.Duplicates {
			fmt.Fprintf(w, "duplicate: %s\n", d)
		}
		for _, e := range engines {
			owner := fmt.Sprintf("its tuner (pid %d) runs", e.Owner)
			if !e.OwnerAlive {
				owner = fmt.Sprintf("its tuner (pid %d) is gone: the next search reaps it, or kill -9 -%d", e.Owner, e.PGID)
			}
			fmt.Fprintf(w, "engine: group %d alive (pids %v, log %s); %s\n", e.PGID, e.Live, e.Log, owner)
		}
	}
	if err != nil {
		return err // a *store.CorruptError names the file
	}
	if !c.Bool("json") {
		fmt.Fprintf(w, "ok: %s: schema %d, %d studies, %d trials (%d running), %d fronts, %d models",
			rep.Path, rep.Schema, rep.Studies, rep.Trials, rep.Running, rep.Fronts, rep.Models)
		if n := len(rep.Duplicates); n > 0 {
			fmt.Fprintf(w, "; %d duplicate measurements (listed above)", n)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// liveEngines lists the engine groups still alive that were recorded in
// the per-user run dir or in the log dirs of this database's trials (the
// default one of each study under dataDir, and every dir a stored trial
// logged to).
func liveEngines(c *cli.Context, s store.DB, dataDir string) []trial.StaleEngine {
	var dirs []string // the database's log directories
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	if studies, err := s.Studies(c.Context); err == nil {
		for _, st := range studies {
			add(filepath.Join(dataDir, "logs", st.ID))
			trs, err := s.Trials(c.Context, st.ID, store.TrialFilter{})
			if err != nil {
				continue
			}
			for _, tr := range trs {
				if tr.Result != nil && tr.Result.LogPath != "" {
					add(filepath.Dir(tr.Result.LogPath))
				}
			}
		}
	}
	// The per-user run directory holds the records of every tuner of the
	// user: only engines logging into this database's directories are its.
	ours := func(e trial.StaleEngine) bool {
		for _, d := range dirs {
			if filepath.Dir(e.Path) == d || e.Log != "" && strings.HasPrefix(e.Log, d+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	var out []trial.StaleEngine
	for _, e := range trial.StaleEngines(append(dirs, trial.DefaultRunDir())...) {
		if len(e.Live) > 0 && ours(e) {
			out = append(out, e)
		}
	}
	return out
}

func dbBackup(c *cli.Context) error {
	if c.NArg() != 1 || c.Args().First() == "" {
		return usagef("db backup needs exactly one argument: the destination PATH")
	}
	s, err := openDB(c)
	if err != nil {
		return err
	}
	defer s.Close()
	dst := c.Args().First()
	if err := s.Backup(c.Context, dst); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "backed up %s to %s\n", s.Path(), dst)
	return nil
}

func dbExport(c *cli.Context) error {
	format := c.String("format")
	if format != "csv" && format != "jsonl" {
		return usagef("--format %q: want csv or jsonl", format)
	}
	s, err := openDB(c)
	if err != nil {
		return err
	}
	defer s.Close()
	q := store.ExportQuery{StudyID: c.String("study")}
	return writeOutput(c.App.Writer, c.String("output"), func(w io.Writer) error {
		if format == "csv" {
			return store.ExportCSV(c.Context, s, w, q)
		}
		return store.ExportJSONL(c.Context, s, w, q)
	})
}
