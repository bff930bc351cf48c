package reliability

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// badInput is one bad command line: the tuner must exit 2 with a message
// naming what is wrong and where, and write nothing.
type badInput struct {
	name string
	args []string // after --db DB
	want []string // substrings of stderr
	// gap names a known, reported shortcoming: the case is skipped when it
	// fails unless RELIABILITY_STRICT=1.
	gap string
}

const tinyWorkload = "../cmd/tuner/testdata/tiny-chat.yaml"

func searchArgs(extra ...string) []string {
	return append([]string{"search", "--engine", "sim-virtual", "--model", "tiny", "--gpu", simGPU, "--workload", tinyWorkload, "--trials", "1"}, extra...)
}

func badInputs() []badInput {
	bad := func(f string) string { return filepath.Join("testdata", "bad", f) }
	return []badInput{
		// Workload files and datasets.
		{name: "workload missing", args: searchArgs("--workload", bad("nonexistent.yaml")), want: []string{"--workload", "nonexistent.yaml"}},
		{name: "workload preset unknown", args: searchArgs("--workload", "no-such-preset"), want: []string{"--workload", "no-such-preset", "chat"}},
		{name: "workload range", args: searchArgs("--workload", bad("workload-range.yaml")), want: []string{"workload-range.yaml:2", "prompt", "min <= max"}},
		{name: "workload unknown field", args: searchArgs("--workload", bad("workload-unknown-field.yaml")), want: []string{"workload-unknown-field.yaml:6", "bogus"}},
		{name: "workload syntax", args: searchArgs("--workload", bad("workload-syntax.yaml")), want: []string{"workload-syntax.yaml:2"}},
		{name: "workload concurrency 0", args: searchArgs("--workload", bad("workload-concurrency.yaml")), want: []string{"workload-concurrency.yaml", "concurrency"}},
		{name: "sharegpt missing", args: searchArgs("--workload", bad("workload-sharegpt-missing.yaml")), want: []string{"sharegpt", "nonexistent.json"}},
		{name: "sharegpt wrong type", args: searchArgs("--workload", bad("workload-sharegpt-type.yaml")), want: []string{"sharegpt-type.json", "conversation 0"}},
		{name: "sharegpt truncated", args: searchArgs("--workload", bad("workload-sharegpt-truncated.yaml")), want: []string{"sharegpt-truncated.json"}},
		// Space and profile files.
		{name: "space missing", args: searchArgs("--space", bad("nonexistent.yaml")), want: []string{"space", "nonexistent.yaml"}},
		{name: "space unknown field", args: searchArgs("--space", bad("space-unknown-field.yaml")), want: []string{"space-unknown-field.yaml:3", "bogus"}},
		{name: "space syntax", args: searchArgs("--space", bad("space-syntax.yaml")), want: []string{"space-syntax.yaml:1"}},
		{name: "space bad range", args: searchArgs("--space", "../spaces/testdata/bad-min-gt-max.yaml"), want: []string{"bad-min-gt-max.yaml:"}},
		{name: "space unknown flag", args: searchArgs("--space", "../spaces/testdata/bad-unknown-flag.yaml"), want: []string{"bad-unknown-flag.yaml:"}},
		{name: "space bad constraint", args: searchArgs("--space", "../spaces/testdata/bad-constraint.yaml"), want: []string{"bad-constraint.yaml:"}},
		{name: "space command bad file", args: []string{"space", "--model", "tiny", "--gpu", simGPU, "--file", bad("space-unknown-field.yaml")}, want: []string{"space-unknown-field.yaml:3"}},
		{name: "profiles negative memory", args: searchArgs("--profiles", bad("profiles-negative.yaml")), want: []string{"profiles-negative.yaml", "gpus[0].memory_gib"}},
		{name: "profiles syntax", args: searchArgs("--profiles", bad("profiles-syntax.yaml")), want: []string{"profiles-syntax.yaml"}},
		{name: "profiles missing", args: searchArgs("--profiles", bad("nonexistent.yaml")), want: []string{"profiles", "nonexistent.yaml"}},
		// Targets.
		{name: "model unknown", args: []string{"search", "--engine", "sim-virtual", "--model", "nosuch", "--gpu", simGPU, "--workload", tinyWorkload}, want: []string{`model "nosuch"`, "tiny-llama"}},
		{name: "gpu unknown", args: []string{"search", "--engine", "sim-virtual", "--model", "tiny", "--gpu", "nosuch", "--workload", tinyWorkload}, want: []string{`gpu "nosuch"`, "H100-80GB"}},
		{name: "gpus 0", args: searchArgs("--gpus", "0"), want: []string{"--gpus"}},
		{name: "max-model-len negative", args: searchArgs("--max-model-len", "-5"), want: []string{"--max-model-len", "-5"}},
		{name: "max-model-len too big", args: searchArgs("--max-model-len", "99999999"), want: []string{"--max-model-len", "99999999"}},
		{name: "engine-version unknown", args: searchArgs("--engine-version", "0.0.bogus"), want: []string{"--engine-version", "0.0.bogus"}},
		// SLO and objective expressions.
		{name: "slo bad value", args: searchArgs("--slo", "ttft_p99<=abc"), want: []string{"--slo", `"abc"`}},
		{name: "slo unknown metric", args: searchArgs("--slo", "nosuch<=5ms"), want: []string{"--slo", `"nosuch"`}},
		{name: "slo no bound", args: searchArgs("--slo", "ttft_p99"), want: []string{"--slo", "METRIC<=VALUE"}},
		{name: "slo negative", args: searchArgs("--slo", "ttft_p99<=-5ms"), want: []string{"--slo", "-5"}},
		{name: "slo second term", args: searchArgs("--slo", "ttft_p99<=5ms,tpot_p99<<3"), want: []string{"--slo", "term 2"}},
		{name: "latency unknown", args: searchArgs("--latency", "nosuch"), want: []string{"--latency", `"nosuch"`}},
		{name: "sampler unknown", args: searchArgs("--sampler", "nosuch"), want: []string{"--sampler", `"nosuch"`}},
		{name: "engine unknown", args: searchArgs("--engine", "nosuch"), want: []string{"--engine", `"nosuch"`}},
		// Numbers and durations.
		{name: "requests 0", args: searchArgs("--requests", "0"), want: []string{"--requests"}},
		{name: "duration negative", args: searchArgs("--duration", "-1s"), want: []string{"--duration"}},
		{name: "duration garbage", args: searchArgs("--duration", "abc"), want: []string{"duration", "abc"}},
		{name: "seed garbage", args: searchArgs("--seed", "abc"), want: []string{"seed", "abc"}},
		{name: "trials negative", args: searchArgs("--trials", "-1"), want: []string{"--trials"}},
		{name: "budget negative", args: searchArgs("--budget", "-1h"), want: []string{"--budget"}},
		{name: "trial-timeout negative", args: searchArgs("--trial-timeout", "-5m"), want: []string{"--trial-timeout"}},
		{name: "patience negative", args: searchArgs("--patience", "-1"), want: []string{"--patience"}},
		{name: "finalists negative", args: searchArgs("--finalists", "-1"), want: []string{"--finalists"}},
		{name: "repeats negative", args: searchArgs("--repeats", "-1"), want: []string{"--repeats"}},
		{name: "startup-timeout negative", args: searchArgs("--startup-timeout", "-1s"), want: []string{"--startup-timeout"}},
		// Engine pass-through.
		{name: "engine-env without value", args: searchArgs("--engine-env", "FOO"), want: []string{"--engine-env", "NAME=VALUE"}},
		{name: "engine-env empty name", args: searchArgs("--engine-env", "=x"), want: []string{"--engine-env", "NAME=VALUE"}},
		{name: "engine-env not allowlisted", args: searchArgs("--engine-env", "AWS_SECRET_ACCESS_KEY=x"), want: []string{"--engine-env AWS_SECRET_ACCESS_KEY", "allowlist"}},
		{name: "engine-arg port", args: searchArgs("--engine-arg=--port=9000"), want: []string{"--engine-arg", "--port"}},
		{name: "vllm-sim missing", args: []string{"search", "--engine", "sim", "--model", "tiny", "--gpu", simGPU, "--workload", tinyWorkload, "--vllm-sim", bad("nonexistent-vllm-sim"), "--trials", "1"},
			want: []string{"--vllm-sim", "nonexistent-vllm-sim"}},
		// Reading commands.
		{name: "recommend prefer", args: []string{"recommend", "--model", "tiny", "--prefer", "nosuch"}, want: []string{"--prefer", `"nosuch"`}},
		{name: "recommend format", args: []string{"recommend", "--model", "tiny", "--format", "nosuch"}, want: []string{"--format", `"nosuch"`}},
		{name: "recommend k", args: []string{"recommend", "--model", "tiny", "--k", "-1"}, want: []string{"--k"}},
		{name: "recommend slo", args: []string{"recommend", "--model", "tiny", "--slo", "bad"}, want: []string{"--slo"}},
		{name: "pareto slo", args: []string{"pareto", "--model", "tiny", "--slo", "bad"}, want: []string{"--slo"}},
		{name: "show bad id", args: []string{"show", "nosuch"}, want: []string{`"nosuch"`, "STUDY-SEQ"}},
		{name: "trials bad state", args: []string{"trials", "--state", "nosuch"}, want: []string{"--state", `"nosuch"`}},
		{name: "export bad format", args: []string{"db", "export", "--format", "nosuch"}, want: []string{"--format", `"nosuch"`}},
		{name: "unknown flag", args: searchArgs("--no-such-flag"), want: []string{"no-such-flag"}},
	}
}

// TestBadInputs runs every bad input twice: against a database path that
// does not exist (it must stay absent) and against an existing database (its
// bytes must not change).
func TestBadInputs(t *testing.T) {
	strict := os.Getenv("RELIABILITY_STRICT") == "1"
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.db")
	if r := runTuner(t, time.Minute, nil, append([]string{"--db", existing}, searchArgs("--repeats", "1")...)...); r.code != 0 {
		t.Fatalf("seed search: exit %d\n%s", r.code, r.stderr)
	}
	orig, err := os.ReadFile(existing)
	if err != nil {
		t.Fatal(err)
	}
	rejected, gaps := 0, 0
	for _, c := range badInputs() {
		t.Run(c.name, func(t *testing.T) {
			var problems []string
			fresh := filepath.Join(t.TempDir(), "fresh.db")
			r := runTuner(t, time.Minute, nil, append([]string{"--db", fresh}, c.args...)...)
			if r.code != 2 {
				problems = append(problems, "exit "+itoa(r.code)+", want 2")
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					problems = append(problems, "message lacks "+strconvQuote(w))
				}
			}
			if _, err := os.Stat(fresh); err == nil {
				problems = append(problems, "database created")
			}
			r2 := runTuner(t, time.Minute, nil, append([]string{"--db", existing}, c.args...)...)
			if now, err := os.ReadFile(existing); err != nil || !bytes.Equal(now, orig) {
				problems = append(problems, "existing database changed")
				os.WriteFile(existing, orig, 0o644)
			}
			if r2.code != r.code {
				problems = append(problems, "exit "+itoa(r2.code)+" with an existing database")
			}
			if len(problems) == 0 {
				rejected++
				return
			}
			msg := strings.Join(problems, "; ") + "\nstderr: " + lastLine(r.stderr)
			if c.gap != "" && !strict {
				gaps++
				t.Skipf("known gap (%s): %s", c.gap, msg)
			}
			t.Error(msg)
		})
	}
	t.Logf("bad inputs: %d of %d rejected cleanly, %d known gaps", rejected, len(badInputs()), gaps)
}

// TestSimBadArgs checks that vllm-sim rejects bad arguments like vLLM's
// argparse: exit 2 before any work, the flag named.
func TestSimBadArgs(t *testing.T) {
	sim := bin(t, "vllm-sim")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-num-seqs", "abc"}, "--max-num-seqs"},
		{[]string{"--port", "99999"}, "--port"},
		{[]string{"--no-such-flag"}, "unrecognized arguments: --no-such-flag"},
		{[]string{"--block-size"}, "--block-size"},
		{[]string{"--fault-crash-after", "x"}, "--fault-crash-after"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			res := runCmd(t, 10*time.Second, sim, append([]string{"serve", "tiny", "--startup-scale", "0.01"}, c.args...)...)
			if res.code != 2 || !strings.Contains(res.stderr+res.stdout, c.want) {
				t.Errorf("exit %d, output %q: want exit 2 naming %q", res.code, lastLine(res.stderr+res.stdout), c.want)
			}
		})
	}
}
