package spaces

import (
	"errors"
	"strings"
	"testing"
)

const extraSpace = `params:
  - name: disable_cascade_attn
    kind: bool
    default: false
    fixed: true
  - name: compilation_config
    kind: categorical
    choices: ['{"cudagraph_mode":"FULL_AND_PIECEWISE"}', '{"cudagraph_mode":"PIECEWISE"}']
    default: '{"cudagraph_mode":"FULL_AND_PIECEWISE"}'
  - name: num-lookahead-slots
    kind: int
    min: 0
    max: 8
    default: 0
  - name: cpu_offload_gb
    kind: float
    min: 0
    max: 4
    step: 0.5
    default: 0
`

func TestEmbeddedFlagList(t *testing.T) {
	m, err := vllmFlags()
	if err != nil {
		t.Fatal(err)
	}
	base, _ := Default()
	for name, f := range m {
		if _, ok := base.Param(name); ok {
			t.Errorf("%s is in the built-in space and in the extra flag list", name)
		}
		for _, v := range []string{f.Since, f.Until} {
			if _, err := parseVersion(v); v != "" && err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if _, ok := LookupFlag("--disable-cascade-attn"); !ok {
		t.Error("LookupFlag does not accept a flag spelling")
	}
}

func TestSpaceExtraFlags(t *testing.T) {
	s, err := Parse("extra.yaml", []byte(extraSpace))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"disable_cascade_attn", "compilation_config", "num_lookahead_slots", "cpu_offload_gb"} {
		p, ok := s.Param(name)
		if !ok || !p.Extra || !p.Active() {
			t.Fatalf("%s: %+v", name, p)
		}
	}
	r, err := s.Resolve(target(t, "Llama-3.1-8B", "H100-80GB", 1, "0.11.0"))
	if err != nil {
		t.Fatal(err)
	}
	c := r.DefaultConfig().
		With("compilation_config", StringValue(`{"cudagraph_mode":"PIECEWISE"}`)).
		With("num_lookahead_slots", IntValue(4)).With("cpu_offload_gb", FloatValue(1.5))
	if err := r.Validate(c); err != nil {
		t.Fatal(err)
	}
	flags := strings.Join(c.Flags(), " ")
	for _, want := range []string{`--compilation-config {"cudagraph_mode":"PIECEWISE"}`, "--disable-cascade-attn", "--num-lookahead-slots 4", "--cpu-offload-gb 1.5"} {
		if !strings.Contains(flags, want) {
			t.Errorf("flags %q lack %q", flags, want)
		}
	}
	y, err := c.YAMLFor("0.11.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`compilation-config: "{\"cudagraph_mode\":\"PIECEWISE\"}"`, "disable-cascade-attn: true", "num-lookahead-slots: 4", "cpu-offload-gb: 1.5"} {
		if !strings.Contains(y, want) {
			t.Errorf("yaml lacks %q:\n%s", want, y)
		}
	}
	// The flags parse back through the space that knows them.
	back, err := r.ParseFlags(c.Flags())
	if err != nil || !back.Equal(c) {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

func TestSpaceExtraFlagRefused(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown", "params:\n  - name: max_num_sequences\n    kind: int\n    default: 1\n", "vLLM has no engine flag --max-num-sequences"},
		{"kind", "params:\n  - name: disable_cascade_attn\n    kind: int\n    default: 0\n", "takes a bool value; kind int does not fit"},
		{"json", "params:\n  - name: compilation_config\n    kind: categorical\n    choices: ['{bad']\n    default: '{bad'\n", "not a valid json value"},
		{"int choice", "params:\n  - name: num_lookahead_slots\n    kind: categorical\n    choices: ['two']\n    default: two\n", "not a valid int value"},
		{"no default", "params:\n  - name: num_lookahead_slots\n    kind: int\n    min: 0\n    max: 4\n", "default: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tt.yaml))
			var fe *FileError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) || fe.Line == 0 {
				t.Fatalf("err %v, want a located error with %q", err, tt.want)
			}
		})
	}
}

func TestSpaceExtraFlagVersion(t *testing.T) {
	y := "params:\n  - name: max_cudagraph_capture_size\n    kind: int\n    values: [256, 512]\n    default: 512\n"
	s, err := Parse("v.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Resolve(target(t, "Llama-3.1-8B", "H100-80GB", 1, "0.11.0"))
	if !errors.Is(err, ErrFlagVersion) || !strings.Contains(err.Error(), "--max-cudagraph-capture-size, which vLLM 0.11.0 does not have (added in 0.11.1)") {
		t.Fatalf("err %v", err)
	}
	if _, err := s.Resolve(target(t, "Llama-3.1-8B", "H100-80GB", 1, "0.11.1")); err != nil {
		t.Fatal(err)
	}
}
