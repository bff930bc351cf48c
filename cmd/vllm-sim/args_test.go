package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadArgsExit2 checks that bad simulator flag values are argument
// errors like argparse's: exit 2, usage and the flag on stderr, nothing
// served.
func TestBadArgsExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fault-http500", "1.5"}, "argument --fault-http500"},
		{[]string{"--fault-malformed-sse", "-1"}, "argument --fault-malformed-sse"},
		{[]string{"--startup-scale", "-0.5"}, "argument --startup-scale"},
		{[]string{"--startup-scale", "inf"}, "argument --startup-scale"},
		{[]string{"--fault-slow-tokens", "0"}, "argument --fault-slow-tokens"},
		{[]string{"--fault-crash-after", "-1"}, "argument --fault-crash-after"},
		{[]string{"--fault-runtime-oom-after", "-1"}, "argument --fault-runtime-oom-after"},
		{[]string{"--gpu", "nosuch"}, "argument --gpu: invalid choice: 'nosuch' (choose from 'A100-40GB', 'A100-80GB', 'H100-80GB'"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"serve", "tiny", "--port", "0"}, c.args...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "usage: vllm serve") {
				t.Fatalf("exit %d, stderr %q: want exit 2 with usage and %q", code, errb.String(), c.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
		})
	}
}
