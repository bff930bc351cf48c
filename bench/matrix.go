package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// MaxCells bounds a matrix (a typo in a cross product should not start a
// week-long run).
const MaxCells = 1000

// Matrix is a parsed scenario matrix: cells of workloads.
type Matrix struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	File        string `json:"file,omitempty"`
	// Hash identifies the resolved cells (not the file's bytes: comments
	// and key order do not change it), 16 hex digits.
	Hash  string `json:"hash"`
	Cells []Cell `json:"cells"`
}

// Cell is one scenario: a named workload (its load levels, or capacity
// mode, are the cell's load axis).
type Cell struct {
	Name     string         `json:"name"`
	Workload trial.Workload `json:"workload"`
}

type rawMatrix struct {
	Name          string                    `yaml:"name"`
	Description   string                    `yaml:"description"`
	Defaults      map[string]any            `yaml:"defaults"`
	Distributions map[string]map[string]any `yaml:"distributions"`
	Loads         map[string]map[string]any `yaml:"loads"`
	Cells         []map[string]any          `yaml:"cells"`
	Cross         map[string][]string       `yaml:"cross"`
}

// distFields may name a distribution of the distributions section.
var distFields = []string{"prompt", "output", "think_ms"}

// loadFields are the workload fields a named load may set.
var loadFields = []string{"arrival", "levels", "capacity", "feedback", "num_requests", "duration", "warmup", "think_ms", "slo"}

// crossAxes are the keys of a cross product, in naming order.
var crossAxes = []string{"prompt", "output", "load", "think_ms"}

// LoadMatrix reads and parses a matrix file; ShareGPT files its cells name
// are loaded relative to it.
func LoadMatrix(path string) (Matrix, error) {
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return Matrix{}, fmt.Errorf("read matrix: %w", err)
	}
	m, err := ParseMatrix(path, b)
	if err != nil {
		return m, err
	}
	for i := range m.Cells {
		w := &m.Cells[i].Workload
		if w.ShareGPT == "" {
			continue
		}
		p := w.ShareGPT
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		if err := w.LoadShareGPTFile(p); err != nil {
			return m, &spaces.FileError{File: path, Field: "cells." + m.Cells[i].Name + ".sharegpt", Msg: err.Error()}
		}
	}
	return m, nil
}

// ParseMatrix decodes and validates a matrix document. Errors are
// *spaces.FileError naming the file, line and field. Each cell is the
// defaults, then its named load, then its own fields, with names of
// distributions resolved, parsed by trial.ParseWorkload.
func ParseMatrix(file string, b []byte) (Matrix, error) {
	var raw rawMatrix
	if err := bounded.DecodeYAML(file, b, &raw, yaml.Strict()); err != nil {
		return Matrix{}, spaces.YAMLError(file, b, err)
	}
	loc := spaces.NewLocator(file, b)
	m := Matrix{Name: raw.Name, Description: raw.Description, File: file}
	if m.Name == "" {
		return m, loc.Errf("$.name", "name", "missing")
	}
	for name, d := range raw.Distributions {
		if _, ok := d["kind"]; !ok {
			return m, loc.Errf("$.distributions."+name, "distributions."+name+".kind", "missing")
		}
	}
	for name, l := range raw.Loads {
		for k := range l {
			if !slices.Contains(loadFields, k) {
				return m, loc.Errf("$.loads."+name+"."+k, "loads."+name+"."+k, "a load sets only %s", strings.Join(loadFields, ", "))
			}
		}
	}
	type spec struct {
		name   string
		fields map[string]any
		path   string // YAML path of the cell ("" for cross cells)
	}
	var specs []spec
	switch {
	case len(raw.Cells) > 0 && len(raw.Cross) > 0:
		return m, loc.Errf("$.cross", "cross", "give cells or cross, not both")
	case len(raw.Cells) > 0:
		for i, c := range raw.Cells {
			p := fmt.Sprintf("$.cells[%d]", i)
			name, _ := c["name"].(string)
			if name == "" {
				return m, loc.Errf(p, fmt.Sprintf("cells[%d].name", i), "missing")
			}
			specs = append(specs, spec{name: name, fields: c, path: p})
		}
	case len(raw.Cross) > 0:
		for k := range raw.Cross {
			if !slices.Contains(crossAxes, k) {
				return m, loc.Errf("$.cross."+k, "cross."+k, "unknown axis (%s)", strings.Join(crossAxes, ", "))
			}
		}
		combos := []spec{{fields: map[string]any{}}}
		for _, axis := range crossAxes {
			names, ok := raw.Cross[axis]
			if !ok {
				continue
			}
			if len(names) == 0 {
				return m, loc.Errf("$.cross."+axis, "cross."+axis, "empty")
			}
			var next []spec
			for _, c := range combos {
				for _, n := range names {
					fields := copyMap(c.fields)
					fields[axis] = n
					next = append(next, spec{name: strings.TrimPrefix(c.name+"-"+n, "-"), fields: fields})
				}
			}
			combos = next
			if len(combos) > MaxCells {
				return m, loc.Errf("$.cross", "cross", "more than %d cells", MaxCells)
			}
		}
		specs = combos
	default:
		return m, loc.Errf("$", "cells", "missing (give cells or cross)")
	}
	if len(specs) > MaxCells {
		return m, loc.Errf("$.cells", "cells", "more than %d cells", MaxCells)
	}
	seen := map[string]bool{}
	for i, s := range specs {
		if seen[s.name] {
			return m, loc.Errf(s.path+".name", fmt.Sprintf("cells[%d].name", i), "duplicate cell name %q", s.name)
		}
		seen[s.name] = true
		doc := copyMap(raw.Defaults)
		if _, ok := doc["name"]; ok {
			return m, loc.Errf("$.defaults.name", "defaults.name", "cells are named by cells[].name")
		}
		// where each key came from, for error lines
		origin := map[string]string{}
		for k := range doc {
			origin[k] = "$.defaults." + k
		}
		if ln, ok := s.fields["load"]; ok {
			lname, _ := ln.(string)
			l, ok := raw.Loads[lname]
			if !ok {
				return m, loc.Errf(pathOr(s.path, "load", "$.cross.load"), cellField(s.name, "load"), "unknown load %q (%s)", ln, strings.Join(sortedKeys(raw.Loads), ", "))
			}
			for k, v := range l {
				doc[k] = v
				origin[k] = "$.loads." + lname + "." + k
			}
		}
		for k, v := range s.fields {
			if k == "load" {
				continue
			}
			doc[k] = v
			origin[k] = pathOr(s.path, k, "$.cross."+k)
		}
		doc["name"] = s.name
		for _, k := range distFields {
			name, ok := doc[k].(string)
			if !ok {
				continue
			}
			d, ok := raw.Distributions[name]
			if !ok {
				return m, loc.Errf(origin[k], cellField(s.name, k), "unknown distribution %q (%s)", name, strings.Join(sortedKeys(raw.Distributions), ", "))
			}
			doc[k] = d
			origin[k] = "$.distributions." + name
		}
		yb, err := yaml.Marshal(doc)
		if err != nil {
			return m, loc.Errf(s.path, cellField(s.name, ""), "%v", err)
		}
		w, err := trial.ParseWorkload(file, yb)
		if err != nil {
			return m, relocate(loc, err, s.name, s.path, origin)
		}
		m.Cells = append(m.Cells, Cell{Name: s.name, Workload: w})
	}
	m.Hash = hashCells(m.Cells)
	return m, nil
}

// relocate maps an error of the synthetic cell document back to the line
// of the matrix file the offending key came from.
func relocate(loc spaces.Locator, err error, cell, cellPath string, origin map[string]string) error {
	var fe *spaces.FileError
	if !errors.As(err, &fe) {
		return err
	}
	root, rest, _ := strings.Cut(fe.Field, ".")
	root, _, _ = strings.Cut(root, "[")
	out := &spaces.FileError{File: loc.File(), Field: cellField(cell, fe.Field), Msg: fe.Msg}
	p, ok := origin[root]
	if !ok {
		p = cellPath
	}
	if p == "" {
		p = "$"
	}
	if rest != "" && !strings.HasPrefix(p, "$.cross") {
		p2 := p + "." + rest
		if l := loc.Line(p2); l > 0 {
			out.Line = l
			return out
		}
	}
	out.Line = loc.Line(p)
	return out
}

func cellField(cell, field string) string {
	if field == "" {
		return "cells." + cell
	}
	return "cells." + cell + "." + field
}

func pathOr(cellPath, key, alt string) string {
	if cellPath == "" {
		return alt
	}
	return cellPath + "." + key
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+4)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SetEndpoint sends every cell's load to ep (bench run --endpoint); a
// cell whose workload names the other endpoint is an error. The hash
// follows the cells: a chat run is not compared with a completions one.
func (m *Matrix) SetEndpoint(ep trial.Endpoint) error {
	for i := range m.Cells {
		w := &m.Cells[i].Workload
		if w.Endpoint == ep || ep == trial.EndpointCompletions && w.Endpoint == "" {
			continue
		}
		if w.Endpoint != "" {
			return fmt.Errorf("cell %s of matrix %s names endpoint %s (drop one of them)", m.Cells[i].Name, m.Name, w.Endpoint)
		}
		w.Endpoint = ep
	}
	m.Hash = hashCells(m.Cells)
	return nil
}

func hashCells(cells []Cell) string {
	b, _ := json.Marshal(cells)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
