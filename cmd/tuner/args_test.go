package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestNormalizeArgs(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct{ in, want string }{
		{"tuner search --db x.db --model m", "tuner --db x.db search --model m"},
		{"tuner search --model m --verbose --db=x.db", "tuner --verbose --db=x.db search --model m"},
		{"tuner bench export r1 --csv", "tuner bench export --csv r1"},
		{"tuner bench export r1 --db x.db --csv", "tuner --db x.db bench export --csv r1"},
		{"tuner bench list --tier smoke --db x.db", "tuner --db x.db bench list --tier smoke"},
		{"tuner show ID --json", "tuner show --json ID"},
		{"tuner show -- ID --json", "tuner show -- ID --json"},
		{"tuner show ID -- --json", "tuner show ID -- --json"},
		{"tuner --db x.db show ID", "tuner --db x.db show ID"},
		{"tuner show ID --bogus", "tuner show --bogus ID"},
		{"tuner recommend --slo --db", "tuner recommend --slo --db"}, // a value that looks like a flag stays a value
		{"tuner surrogate import m.json --schema s.json --target t", "tuner surrogate import --schema s.json --target t m.json"},
		{"tuner", "tuner"},
		{"tuner --help", "tuner --help"},
	} {
		got := strings.Join(normalizeArgs(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func FuzzNormalizeArgs(f *testing.F) {
	f.Add("search --db x --model m -- a b")
	f.Add("bench export r1 --csv --out")
	app := newApp(io.Discard, io.Discard)
	f.Fuzz(func(t *testing.T, line string) {
		in := append([]string{"tuner"}, strings.Fields(line)...)
		out := normalizeArgs(app, in)
		// a permutation: nothing lost, nothing added
		a, b := slices.Clone(in), slices.Clone(out)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("%q -> %q", in, out)
		}
	})
}
