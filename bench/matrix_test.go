package bench

import (
	"errors"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

func TestExampleMatrices(t *testing.T) {
	tests := []struct {
		file  string
		cells []string
	}{
		{"../examples/matrix-smoke.yaml", []string{"chat-c16"}},
		{"../examples/matrix-platform.yaml", []string{"short", "long", "mix"}},
		{"../examples/matrix-sharegpt.yaml", []string{"users", "bursty"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := LoadMatrix(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Cells) != len(tt.cells) {
				t.Fatalf("%d cells, want %v", len(m.Cells), tt.cells)
			}
			for i, c := range m.Cells {
				if c.Name != tt.cells[i] || c.Workload.Name != c.Name {
					t.Errorf("cell %d = %q (workload %q), want %q", i, c.Name, c.Workload.Name, tt.cells[i])
				}
			}
			if len(m.Hash) != 16 {
				t.Errorf("hash %q", m.Hash)
			}
		})
	}
}

func TestMatrixResolution(t *testing.T) {
	m, err := LoadMatrix("../examples/matrix-platform.yaml")
	if err != nil {
		t.Fatal(err)
	}
	short, long, mix := m.Cells[0].Workload, m.Cells[1].Workload, m.Cells[2].Workload
	if short.Prompt.Value != 128 || short.Output.Value != 64 || len(short.Levels) != 3 || short.Levels[2] != 128 || short.NumRequests != 400 {
		t.Errorf("short = %+v", short)
	}
	// the load's num_requests overrides the defaults'
	if long.NumRequests != 64 || long.Warmup != 4 || long.Prompt.Value != 8192 {
		t.Errorf("long = %+v", long)
	}
	if !mix.Capacity || mix.Arrival.Kind != "poisson" || len(mix.Prompt.Mixture) != 3 || mix.Prompt.Mixture[0].Weight != 60 || len(mix.SLO) != 2 {
		t.Errorf("mix = %+v", mix)
	}
	// 60/30/10: the generated prompts follow the weights.
	mix.NumRequests, mix.Warmup = 10000, 0
	count := map[int]int{}
	for _, s := range mix.Requests() {
		count[s.PromptLen]++
	}
	for v, want := range map[int]float64{128: 0.6, 1024: 0.3, 8192: 0.1} {
		if got := float64(count[v]) / 10000; got < want-0.02 || got > want+0.02 {
			t.Errorf("prompt %d share %.3f, want %.2f", v, got, want)
		}
	}
	sg, err := LoadMatrix("../examples/matrix-sharegpt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	users := sg.Cells[0].Workload
	if users.ThinkMS == nil || users.ThinkMS.Min != 1000 || users.ShareGPTPairs() == 0 {
		t.Errorf("sharegpt users cell = %+v", users)
	}
	// The hash follows the resolved cells, not the text.
	again, _ := ParseMatrix("x.yaml", []byte("# a comment\n"+string(mustRead(t, "../examples/matrix-platform.yaml"))))
	if again.Hash != m.Hash {
		t.Errorf("comment changed the hash: %s vs %s", again.Hash, m.Hash)
	}
}

func TestMatrixCross(t *testing.T) {
	y := `name: x
defaults: {num_requests: 10, seed: 2}
distributions:
  a: {kind: fixed, value: 10}
  b: {kind: zipf, min: 10, max: 100, exponent: 1.2}
  o: {kind: fixed, value: 4}
loads:
  c: {arrival: {kind: closed, concurrency: 2}}
  p: {arrival: {kind: poisson}, levels: [1, 2]}
cross:
  prompt: [a, b]
  output: [o]
  load: [c, p]
`
	m, err := ParseMatrix("x.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a-o-c", "a-o-p", "b-o-c", "b-o-p"}
	if len(m.Cells) != len(want) {
		t.Fatalf("%d cells", len(m.Cells))
	}
	for i, c := range m.Cells {
		if c.Name != want[i] {
			t.Errorf("cell %d %q, want %q", i, c.Name, want[i])
		}
	}
	if m.Cells[2].Workload.Prompt.Kind != "zipf" || len(m.Cells[3].Workload.Levels) != 2 {
		t.Errorf("cells = %+v", m.Cells)
	}
}

func TestMatrixErrors(t *testing.T) {
	head := "name: x\ndistributions:\n  p: {kind: fixed, value: 10}\nloads:\n  c: {arrival: {kind: closed, concurrency: 2}}\n"
	tests := []struct {
		name, yaml, field string
		line              int
	}{
		{"no name", "cells: []\n", "name", 0},
		{"unknown top key", "name: x\nbogus: 1\n", "bogus", 2},
		{"no cells", "name: x\n", "cells", 0},
		{"cells and cross", head + "cells: [{name: a}]\ncross: {prompt: [p]}\n", "cross", 7},
		{"cell without name", head + "cells:\n  - prompt: p\n", "cells[0].name", 7},
		{"unknown distribution", head + "cells:\n  - name: a\n    prompt: q\n    output: p\n    load: c\n    num_requests: 3\n", "cells.a.prompt", 8},
		{"unknown load", head + "cells:\n  - name: a\n    prompt: p\n    output: p\n    load: z\n    num_requests: 3\n", "cells.a.load", 10},
		{"bad field in cell", head + "cells:\n  - name: a\n    prompt: p\n    output: p\n    load: c\n    num_requests: -3\n", "cells.a.num_requests", 11},
		{"bad inline dist", head + "cells:\n  - name: a\n    prompt: {kind: uniform, min: 9, max: 1}\n    output: p\n    load: c\n    num_requests: 3\n", "cells.a.prompt", 8},
		{"bad level in load", "name: x\nloads:\n  c:\n    arrival: {kind: closed}\n    levels: [1, 2.5]\ncells:\n  - {name: a, prompt: {kind: fixed, value: 1}, output: {kind: fixed, value: 1}, load: c, num_requests: 3}\n", "cells.a.levels[1]", 5},
		{"bad default", "name: x\ndefaults:\n  duration: soon\ncells:\n  - {name: a, prompt: {kind: fixed, value: 1}, output: {kind: fixed, value: 1}, arrival: {kind: closed, concurrency: 1}}\n", "cells.a.duration", 3},
		{"duplicate cell", head + "cells:\n  - {name: a, prompt: p, output: p, load: c, num_requests: 1}\n  - {name: a, prompt: p, output: p, load: c, num_requests: 1}\n", "cells[1].name", 8},
		{"load field", "name: x\nloads:\n  c:\n    prompt: {kind: fixed, value: 1}\ncells: [{name: a}]\n", "loads.c.prompt", 4},
		{"cross axis", head + "cross:\n  colour: [p]\n", "cross.colour", 7},
		{"zipf in dist", "name: x\ndistributions:\n  z: {kind: zipf, min: 1, max: 10, exponent: 0.5}\ncells:\n  - {name: a, prompt: z, output: z, arrival: {kind: closed, concurrency: 1}, num_requests: 1}\n", "cells.a.prompt.exponent", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMatrix("m.yaml", []byte(tt.yaml))
			var fe *spaces.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *spaces.FileError", err)
			}
			if fe.File != "m.yaml" || fe.Field != tt.field || (tt.line > 0 && fe.Line != tt.line) {
				t.Errorf("error %q: line %d field %q, want line %d field %q", err, fe.Line, fe.Field, tt.line, tt.field)
			}
		})
	}
}
