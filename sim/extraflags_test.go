package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// vLLM flags outside the built-in space are accepted (by type and version),
// kept in the engine config, ignored by the performance model and named in
// the startup log.
func TestExtraFlagsAcceptedNotModelled(t *testing.T) {
	args := []string{"tiny-llama", "--disable-cascade-attn", "--compilation-config", `{"cudagraph_mode":"PIECEWISE"}`,
		"--no-enable-dbo", "--num_lookahead_slots=2", "--max-num-seqs", "64"}
	o, err := ParseServeArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Engine
	if !c.Bool("disable_cascade_attn") || c.Str("compilation_config") != `{"cudagraph_mode":"PIECEWISE"}` ||
		!c.Has("enable_dbo") || c.Bool("enable_dbo") || c.Int("num_lookahead_slots") != 2 {
		t.Fatalf("engine %v", c)
	}
	// The model ignores them: the same arguments as without the extras.
	tg := testTarget(t, "tiny-llama", "H100-80GB", 1)
	with, err := ResolveArgs(tg, c)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := ResolveArgs(tg, c.Without("disable_cascade_attn").Without("compilation_config").Without("enable_dbo").Without("num_lookahead_slots"))
	if err != nil || !reflect.DeepEqual(with, plain) {
		t.Fatalf("extras changed the modelled args: %+v vs %+v (%v)", with, plain, err)
	}
	_, log, stop := startServer(t, args...)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := `accepted but not modelled (no effect on the simulated performance): --compilation-config={"cudagraph_mode":"PIECEWISE"} --disable-cascade-attn=true --enable-dbo=false --num-lookahead-slots=2`
	if !strings.Contains(log.String(), want) {
		t.Fatalf("log lacks %q:\n%s", want, log)
	}
}

func TestExtraFlagsRefused(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"m", "--num-lookahead-slots", "two"}, "argument --num-lookahead-slots: invalid int"},
		{[]string{"m", "--compilation-config", "{bad"}, "argument --compilation-config: invalid JSON value"},
		{[]string{"m", "--max-cudagraph-capture-size", "512"}, "unrecognized arguments: --max-cudagraph-capture-size"},
		{[]string{"m", "--enable-dbo", "--sim-version", "0.10.2"}, "unrecognized arguments: --enable-dbo"},
	}
	for _, tt := range tests {
		if _, err := ParseServeArgs(tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err %v, want %q", tt.args, err, tt.want)
		}
	}
	if o, err := ParseServeArgs([]string{"m", "--max-cudagraph-capture-size", "512", "--sim-version", "0.11.1"}); err != nil || o.Engine.Int("max_cudagraph_capture_size") != 512 {
		t.Fatalf("0.11.1: %v %v", o.Engine, err)
	}
}

// The --config file the tuner writes for a config with extra flags reads
// back to the same engine config (both loader generations).
func TestExtraFlagsConfigFile(t *testing.T) {
	o, err := ParseServeArgs([]string{"m", "--no-disable-cascade-attn", "--compilation-config", `{"cudagraph_mode":"FULL"}`, "--cpu-offload-gb", "1.5"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0.11.0", "0.28.0"} {
		y, err := o.Engine.YAMLFor(v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		back, err := ParseServeArgs([]string{"m", "--config", path, "--sim-version", v})
		if err != nil {
			t.Fatalf("%s: %v\n%s", v, err, y)
		}
		if !back.Engine.Equal(o.Engine) {
			t.Errorf("%s: %v, want %v\n%s", v, back.Engine, o.Engine, y)
		}
	}
}
