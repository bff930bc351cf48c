package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/internal/atomicfile"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

func init() { register(surrogateCommand()) }

// modelKind marks surrogate blobs in the store's model bucket.
const modelKind = surrogate.BlobFormat + "-v1"

func historyFlags() []cli.Flag {
	return append(targetFlags(),
		&cli.StringFlag{Name: "workload", Usage: "only studies of this workload: a built-in name or the YAML file the studies ran (needed for workloads that are not built in)"},
		&cli.StringFlag{Name: "engine", Usage: "only studies of this engine (vllm, sim, sim-virtual)"},
	)
}

func surrogateCommand() *cli.Command {
	return &cli.Command{
		Name:  "surrogate",
		Usage: "evaluate, export training data for, and import surrogate models",
		Subcommands: []*cli.Command{
			{
				Name:      "import",
				Usage:     "validate an external model (LightGBM text or XGBoost JSON) and store it",
				ArgsUsage: "FILE --schema SCHEMA --target NAME",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "schema", Usage: "feature schema file (as export-data writes it)"},
					&cli.StringFlag{Name: "target", Usage: "what the model predicts: a schema target (throughput, latency, vram) or feasible"},
					&cli.StringFlag{Name: "name", Usage: "store the model under this name (default: imported); an existing model with the same schema gains or replaces this target"},
					&cli.BoolFlag{Name: "replace", Usage: "replace an existing model of that name instead of merging"},
				},
				Action: surrogateImport,
			},
			{
				Name:      "export-data",
				Usage:     "write the training matrix of the stored history (CSV or libsvm) and its feature schema",
				ArgsUsage: " ",
				Flags: append(historyFlags(),
					&cli.StringFlag{Name: "format", Value: surrogate.FormatCSV, Usage: "csv or libsvm"},
					&cli.StringFlag{Name: "label", Usage: "libsvm label: throughput, latency, vram or feasible"},
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "data file (default stdout)"},
					&cli.StringFlag{Name: "schema-out", Usage: "schema file to write (default: OUTPUT.schema.json; required with stdout)"},
				),
				Action: surrogateExport,
			},
			{
				Name:      "train",
				Usage:     "train the surrogate on the stored history and store it, to steer other searches (tuner search --surrogate NAME)",
				ArgsUsage: " ",
				Flags: append(historyFlags(),
					&cli.StringFlag{Name: "name", Value: "trained", Usage: "store the model under this name (replaces a model of that name)"},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the bagging"},
				),
				Action: surrogateTrain,
			},
			{
				Name:      "eval",
				Usage:     "cross-validate the surrogate on the stored history: R^2 / MAPE per target, AUC of feasibility",
				ArgsUsage: " ",
				Flags: append(historyFlags(),
					&cli.IntFlag{Name: "folds", Value: 5, Usage: "cross-validation folds"},
					&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
				),
				Action: surrogateEval,
			},
			{
				Name:      "list",
				Usage:     "list stored surrogate models",
				ArgsUsage: " ",
				Action:    surrogateList,
			},
		},
	}
}

// importArgs reads import's flags whether they come before or after FILE
// (urfave/cli stops at the first argument; `import FILE --schema F` is the
// documented order).
type importArgs struct {
	file, schema, target, name string
	replace                    bool
}

func parseImportArgs(c *cli.Context) (importArgs, error) {
	a := importArgs{schema: c.String("schema"), target: c.String("target"), name: c.String("name"), replace: c.Bool("replace")}
	if c.NArg() < 1 {
		return a, usagef("surrogate import needs a model FILE")
	}
	a.file = c.Args().First()
	switch {
	case c.NArg() > 1:
		return a, usagef("surrogate import takes one model FILE, got also %q", c.Args().Tail())
	case a.schema == "":
		return a, usagef("surrogate import needs --schema FILE (the schema export-data wrote)")
	case a.target == "":
		return a, usagef("surrogate import needs --target (a schema target or %s)", surrogate.FeasibilityName)
	}
	if a.name == "" {
		a.name = "imported"
	}
	return a, nil
}

func surrogateImport(c *cli.Context) error {
	a, err := parseImportArgs(c)
	if err != nil {
		return err
	}
	file := a.file
	model, err := bounded.ReadFile(file, int64(surrogate.DefaultLimits().MaxBytes))
	if err != nil {
		return asUsage(err)
	}
	sb, err := bounded.ReadFile(a.schema, 16<<20)
	if err != nil {
		return asUsage(err)
	}
	schema, err := surrogate.ParseSchema(sb)
	if err != nil {
		return usagef("--schema %s: %w", a.schema, err)
	}
	imp, err := surrogate.Import(model, schema, a.target, surrogate.DefaultLimits())
	if err != nil {
		return usagef("%s: %w", file, err)
	}
	name := a.name
	path, err := dbArg(c)
	if err != nil {
		return err
	}
	st, err := dbopen.Open(c.Context, path, dbopen.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	result := imp
	if !a.replace {
		old, _, err := st.GetModel(c.Context, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			prev, err := surrogate.Unmarshal(old)
			if err != nil {
				return fmt.Errorf("stored model %s: %w (use --replace)", name, err)
			}
			if result, err = surrogate.Merge(prev, imp); err != nil {
				return fmt.Errorf("merge into stored model %s: %w (use --replace)", name, err)
			}
		}
	}
	if err := putSurrogate(c.Context, st, name, result); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "stored %s: %s (%s) from %s; targets %s\n", name, a.target,
		imp.Metrics.Origin, filepath.Base(file), describeTargets(result))
	return nil
}

func describeTargets(s *surrogate.Surrogate) string {
	var names []string
	for _, o := range s.Objectives {
		names = append(names, o.Name)
	}
	if s.HasClassifier() {
		names = append(names, surrogate.FeasibilityName)
	}
	return strings.Join(names, ", ")
}

// putSurrogate stores a surrogate blob with its schema and metrics as metadata.
func putSurrogate(ctx context.Context, st store.DB, name string, s *surrogate.Surrogate) error {
	blob, err := s.Marshal()
	if err != nil {
		return err
	}
	schema, err := s.Schema.MarshalIndent()
	if err != nil {
		return err
	}
	metrics := map[string]float64{"samples": float64(s.Metrics.Samples), "members": float64(s.Metrics.Members)}
	for _, o := range s.Metrics.Objectives {
		metrics[o.Name+"_oob_mape"] = o.OOBMAPE
	}
	if s.Metrics.OOBAUC > 0 {
		metrics["feasible_oob_auc"] = s.Metrics.OOBAUC
	}
	return st.PutModel(ctx, name, blob, store.ModelMeta{Kind: modelKind, Schema: schema, Metrics: metrics})
}

// historyMatrix reads the finished trials of the selected studies and
// encodes them with the schema of the target's resolved default space.
func historyMatrix(c *cli.Context) (*surrogate.Matrix, int, error) {
	t, ok, err := resolveTarget(c)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, usagef("--model and --gpu are required")
	}
	space, err := spaces.ResolveDefault(t)
	if err != nil {
		return nil, 0, asUsage(err)
	}
	st, err := openReader(c)
	if err != nil {
		return nil, 0, err
	}
	defer st.Close()
	workloads := map[string]trial.Workload{}
	wname := c.String("workload")
	if wname != "" {
		w, err := loadWorkloadArg(wname)
		if err != nil {
			return nil, 0, err
		}
		wname = w.Name
		workloads[w.Name] = w
	}
	// Every study of the model's profile (base and -Instruct alike) trains it.
	studies, err := matchStudies(c.Context, st, "", t.GPU.Name, wname, c.String("engine"))
	if err != nil {
		return nil, 0, err
	}
	byID := map[string]store.Study{}
	for _, s := range studies {
		if s.Key.Model == t.Model.Name && s.Key.GPUCount == t.GPUCount {
			byID[s.ID] = s
		}
	}
	trials, err := st.HistoryTrials(c.Context, store.HistoryQuery{Model: t.Model.Name, GPU: t.GPU.Name, GPUCount: t.GPUCount})
	if err != nil {
		return nil, 0, fmt.Errorf("read history: %w", err)
	}
	var samples []surrogate.Sample
	for _, tr := range trials {
		sk, ok := byID[tr.StudyID]
		if !ok || tr.Result == nil || tr.State == store.StateInterrupted {
			continue
		}
		w, ok := workloads[sk.Key.Workload]
		if !ok {
			if w, err = trial.LoadWorkload(sk.Key.Workload); err != nil {
				return nil, 0, usagef("study %s ran workload %q, which is not built in: pass its file with --workload FILE", sk.ID, sk.Key.Workload)
			}
			workloads[sk.Key.Workload] = w
		}
		tt := t
		tt.EngineVersion = sk.Key.EngineVersion
		samples = append(samples, surrogate.Sample{Target: tt, Workload: w, Config: tr.Config, Result: tr.Result})
	}
	if len(samples) == 0 {
		return nil, 0, fmt.Errorf("no finished trials of %s in the database: %w", t.Describe(), surrogate.ErrNoData)
	}
	m, err := surrogate.BuildMatrix(surrogate.NewSchema(space), historyObjectives(byID), samples)
	return m, len(byID), err
}

// historyObjectives are the default three, with the latency metric the
// studies optimise (their second objective) when they agree on one.
func historyObjectives(studies map[string]store.Study) []surrogate.Objective {
	objs := surrogate.DefaultObjectives()
	latency := ""
	for _, st := range studies {
		if len(st.Key.Objectives) < 2 {
			continue
		}
		switch n := st.Key.Objectives[1].Name; {
		case latency == "":
			latency = n
		case latency != n:
			return objs // mixed: keep the default
		}
	}
	if latency != "" && latency != objs[1].Metric {
		l := surrogate.ObjectiveFor(latency)
		l.Name = objs[1].Name
		objs[1] = l
	}
	return objs
}

func surrogateExport(c *cli.Context) error {
	out, schemaOut := c.String("output"), c.String("schema-out")
	if schemaOut == "" {
		if out == "" {
			return usagef("--schema-out is required when the data goes to stdout")
		}
		schemaOut = strings.TrimSuffix(out, filepath.Ext(out)) + ".schema.json"
	}
	format := c.String("format")
	if format != surrogate.FormatCSV && format != surrogate.FormatLibSVM {
		return usagef("--format %q: csv or libsvm", format)
	}
	if format == surrogate.FormatLibSVM && c.String("label") == "" {
		return usagef("--format libsvm needs --label (throughput, latency, vram or feasible)")
	}
	m, nStudies, err := historyMatrix(c)
	if err != nil {
		return err
	}
	var data bytes.Buffer
	if err := surrogate.ExportData(&data, m, surrogate.ExportOptions{Format: format, Label: c.String("label")}); err != nil {
		return asUsage(err)
	}
	sb, err := m.WithTargets().MarshalIndent()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(schemaOut, append(sb, '\n'), 0o644); err != nil {
		return err
	}
	if out == "" {
		_, err := c.App.Writer.Write(data.Bytes())
		return err
	}
	if err := atomicfile.WriteFile(out, data.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "wrote %d rows x %d features from %d studies to %s (schema %s)\n",
		len(m.X), len(m.Schema.Features), nStudies, out, schemaOut)
	return nil
}

func surrogateEval(c *cli.Context) error {
	folds := c.Int("folds")
	if folds < 2 {
		return usagef("--folds must be >= 2")
	}
	m, nStudies, err := historyMatrix(c)
	if err != nil {
		return err
	}
	r, err := surrogate.Evaluate(c.Context, m, surrogate.DefaultOptions(), folds)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, r)
	}
	fmt.Fprintf(c.App.Writer, "history: %d trials from %d studies\n", len(m.X), nStudies)
	return r.WriteText(c.App.Writer)
}

func surrogateTrain(c *cli.Context) error {
	m, nStudies, err := historyMatrix(c)
	if err != nil {
		return err
	}
	opts := surrogate.DefaultOptions()
	opts.Seed = c.Uint64("seed")
	sur, err := surrogate.TrainMatrix(m, opts)
	if err != nil {
		return fmt.Errorf("train on %d trials: %w", len(m.X), err)
	}
	path, err := dbArg(c)
	if err != nil {
		return err
	}
	st, err := dbopen.Open(c.Context, path, dbopen.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	name := c.String("name")
	if err := putSurrogate(c.Context, st, name, sur); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "stored %s: trained on %d trials from %d studies (%s)\n", name, len(m.X), nStudies, describeTargets(sur))
	return nil
}

func surrogateList(c *cli.Context) error {
	st, err := openReader(c)
	if err != nil {
		return err
	}
	defer st.Close()
	metas, err := st.ListModels(c.Context)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSIZE\tCREATED\tMETRICS")
	for _, m := range metas {
		var ms []string
		for k, v := range m.Metrics {
			ms = append(ms, fmt.Sprintf("%s=%.3g", k, v))
		}
		slices.Sort(ms)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", m.Name, cmp.Or(m.Kind, "-"), m.Size, m.Created.Format("2006-01-02 15:04"), strings.Join(ms, " "))
	}
	return tw.Flush()
}
