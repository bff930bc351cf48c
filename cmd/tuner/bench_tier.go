package main

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/bench"
)

// The tier presets are the example matrices (a test keeps them equal):
// smoke is examples/matrix-smoke.yaml (one cell, about 30 s of measurement:
// some 600 requests on a mid-size model, enough for the gate to see a 5%
// TPOT shift), nightly and release are examples/matrix-platform.yaml (the
// full platform matrix); release runs it once per model of --models.
//
//go:embed tiers/*.yaml
var tierFiles embed.FS

var tierPresets = map[string]string{"smoke": "tiers/smoke.yaml", "nightly": "tiers/nightly.yaml", "release": "tiers/nightly.yaml"}

// tierMatrix is --matrix when given, else the --tier preset's matrix.
func tierMatrix(c *cli.Context) (bench.Matrix, error) {
	return tierMatrixOf(c.String("matrix"), c.String("tier"))
}

// tierMatrixOf loads path, or the tier's preset when path is empty.
func tierMatrixOf(path, tier string) (bench.Matrix, error) {
	if path != "" {
		m, err := bench.LoadMatrix(path)
		return m, asUsage(err)
	}
	file, ok := tierPresets[tier]
	if !ok {
		if tier == "" {
			return bench.Matrix{}, usagef("bench run needs --matrix FILE or --tier smoke|nightly|release")
		}
		return bench.Matrix{}, usagef("--tier %q: want smoke, nightly or release (or give --matrix)", tier)
	}
	b, err := tierFiles.ReadFile(file)
	if err != nil {
		return bench.Matrix{}, err
	}
	m, err := bench.ParseMatrix("tier "+tier, b)
	return m, asUsage(err)
}

// benchRunTier is bench run with the release tier: one run per model of
// --models (each stored with tier release), stopping at the first error.
func benchRunTier(c *cli.Context) error {
	models := c.String("models")
	if c.String("tier") != "release" {
		if models != "" {
			return usagef("--models is for --tier release")
		}
		return benchRun(c)
	}
	if models == "" {
		return usagef("--tier release needs --models FILE (one model a line)")
	}
	if c.IsSet("model") {
		return usagef("--tier release takes its models from --models, not --model")
	}
	list, err := readModelList(models)
	if err != nil {
		return err
	}
	for i, m := range list {
		fmt.Fprintf(c.App.ErrWriter, "release: model %d of %d: %s\n", i+1, len(list), m)
		if err := c.Set("model", m); err != nil {
			return err
		}
		if err := benchRun(c); err != nil {
			return fmt.Errorf("release tier, model %s: %w", m, err)
		}
	}
	return nil
}

// readModelList reads one model a line; blank lines and # comments are
// skipped.
func readModelList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--models: %v", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, usagef("%s:%d: %q: want one model name a line", path, n, line)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, usagef("--models %s lists no model", path)
	}
	return out, nil
}
