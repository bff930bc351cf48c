package sim

import (
	"errors"
	"strings"
	"testing"
)

func TestServeArgsBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // substring of the *ArgError; "" = accepted
	}{
		{[]string{"--fault-http500", "0"}, ""},
		{[]string{"--fault-http500", "1"}, ""},
		{[]string{"--fault-http500", "1.5"}, "argument --fault-http500: invalid value: 1.5"},
		{[]string{"--fault-http500=-0.1"}, "argument --fault-http500"},
		{[]string{"--fault-malformed-sse", "2"}, "argument --fault-malformed-sse"},
		{[]string{"--fault-malformed-sse", "inf"}, "argument --fault-malformed-sse"},
		{[]string{"--startup-scale", "0"}, ""},
		{[]string{"--startup-scale", "-1"}, "argument --startup-scale: invalid value: -1"},
		{[]string{"--startup-scale", "+Inf"}, "argument --startup-scale"},
		{[]string{"--time-scale", "0"}, "argument --time-scale"},
		{[]string{"--fault-slow-tokens", "0.5"}, ""},
		{[]string{"--fault-slow-tokens", "0"}, "argument --fault-slow-tokens: invalid value: 0"},
		{[]string{"--fault-slow-tokens", "-2"}, "argument --fault-slow-tokens"},
		{[]string{"--fault-crash-after", "0"}, ""},
		{[]string{"--fault-crash-after", "-1"}, "argument --fault-crash-after: invalid value: -1"},
		{[]string{"--fault-runtime-oom-after", "-3"}, "argument --fault-runtime-oom-after"},
		{[]string{"--gpu-count", "-1"}, "argument --gpu-count"},
		{[]string{"--gpu", "h100"}, ""}, // alias, case-insensitive
		{[]string{"--gpu", "nosuch"}, "argument --gpu: invalid choice: 'nosuch' (choose from 'A100-40GB', 'A100-80GB', 'H100-80GB'"},
		{[]string{"--gpu", "B200-180GB", "--sim-profiles", "testdata/profiles.yaml"}, ""},
		{[]string{"--gpu", "nosuch", "--sim-profiles", "testdata/profiles.yaml"}, "'B200-180GB'"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := ParseServeArgs(append([]string{"tiny"}, c.args...))
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ae *ArgError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want an *ArgError containing %q", err, c.want)
			}
		})
	}
}
