package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/surrogate"
)

func copyDB(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "tuner.db")
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestSurrogateCommands(t *testing.T) {
	db := copyDB(t, virtualFixture(t))
	hist := []string{"--model", testModel, "--gpu", testGPU, "--workload", "testdata/tiny-chat.yaml"}

	// eval
	code, out, errb := runTuner(t, append([]string{"--db", db, "surrogate", "eval", "--folds", "3"}, hist...)...)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errb)
	}
	for _, want := range []string{"3-fold cross-validation", "throughput", "tpot_p99", "peak_vram_gib"} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errb := runTuner(t, "--db", db, "surrogate", "eval", "--model", testModel, "--gpu", testGPU); code != exitUsage || !strings.Contains(errb, "--workload FILE") {
		t.Errorf("eval without the workload file: exit %d: %s", code, errb)
	}

	// export-data
	dir := t.TempDir()
	data := filepath.Join(dir, "data.csv")
	code, _, errb = runTuner(t, append([]string{"--db", db, "surrogate", "export-data", "-o", data}, hist...)...)
	if code != 0 {
		t.Fatalf("export-data: exit %d: %s", code, errb)
	}
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile(filepath.Join(dir, "data.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := surrogate.ParseSchema(sb)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 10 || len(rows[0]) != len(schema.Features)+len(schema.Targets)+1 || rows[0][len(rows[0])-1] != "feasible" {
		t.Fatalf("export: %d rows, header %v", len(rows), rows[0])
	}

	// import: a LightGBM model trained on the export, then the same schema's
	// classifier slot refusing a regression model.
	var d surrogate.Dataset
	for _, r := range rows[1:] {
		var x []float64
		for _, v := range r[:len(schema.Features)] {
			x = append(x, parseF(t, v))
		}
		if y := r[len(schema.Features)]; y != "" {
			d.X, d.Y = append(d.X, x), append(d.Y, parseF(t, y))
		}
	}
	cfg := surrogate.DefaultGBDTConfig()
	cfg.EarlyStoppingRounds, cfg.NumTrees, cfg.MinDataInLeaf = 0, 10, 1
	b, err := surrogate.TrainGBDT(d, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "tput.txt")
	if err := os.WriteFile(model, b.LightGBMText(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	schemaPath := filepath.Join(dir, "data.schema.json")
	code, out, errb = runTuner(t, "--db", db, "surrogate", "import", model, "--schema", schemaPath, "--target", "throughput", "--name", "fleet")
	if code != 0 || !strings.Contains(out, "stored fleet") {
		t.Fatalf("import: exit %d: %s %s", code, out, errb)
	}
	if code, _, errb := runTuner(t, "--db", db, "surrogate", "import", model, "--schema", schemaPath, "--target", "feasible", "--name", "fleet"); code != exitUsage {
		t.Errorf("regression model as classifier: exit %d: %s", code, errb)
	}
	if code, _, errb := runTuner(t, "--db", db, "surrogate", "import", "../../surrogate/testdata/xgb_hand.json", "--schema", schemaPath, "--target", "throughput"); code != exitUsage || !strings.Contains(errb, "features") {
		t.Errorf("XGBoost model with 2 features: exit %d: %s", code, errb)
	}
	code, out, errb = runTuner(t, "--db", db, "surrogate", "list")
	if code != 0 || !strings.Contains(out, "fleet") || !strings.Contains(out, "tuner-surrogate-v1") {
		t.Fatalf("list: exit %d: %s %s", code, out, errb)
	}
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

// A model trained on one study's history and stored steers another search
// (--surrogate NAME); names that are neither a file nor a stored model, and
// --no-surrogate beside it, are usage errors.
func TestSurrogateTrainSteersSearch(t *testing.T) {
	db := copyDB(t, virtualFixture(t))
	hist := []string{"--model", testModel, "--gpu", testGPU, "--workload", "testdata/tiny-chat.yaml"}
	code, out, errb := runTuner(t, append([]string{"--db", db, "surrogate", "train", "--name", "fleet"}, hist...)...)
	if code != 0 || !strings.Contains(out, "stored fleet: trained on") {
		t.Fatalf("train: exit %d: %s%s", code, out, errb)
	}
	code, out, _ = runTuner(t, "--db", db, "surrogate", "list")
	if code != 0 || !strings.Contains(out, "fleet") {
		t.Fatalf("list after train: exit %d: %s", code, out)
	}
	// A new study (another SLO) steered by the stored model.
	code, out, errb = runTuner(t, "--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual",
		"--workload", "testdata/tiny-chat.yaml", "--slo", "tpot_p99<=60ms", "--trials", "4", "--budget", "0",
		"--finalists", "1", "--repeats", "1", "--surrogate", "fleet")
	if code != 0 {
		t.Fatalf("search --surrogate fleet: exit %d: %s%s", code, out, errb)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--surrogate", "no-such-model"}, "no such file or stored model"},
		{[]string{"--surrogate", "fleet", "--no-surrogate"}, "exclude each other"},
	} {
		code, _, errb := runTuner(t, virtualArgs(db, tc.args...)...)
		if code != exitUsage || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb, exitUsage, tc.want)
		}
	}
}
