package spaces

import (
	"strings"
	"testing"
)

func TestExpr(t *testing.T) {
	env := func(id string) (Value, bool) {
		m := map[string]Value{
			"a": IntValue(6), "b": IntValue(4), "on": BoolValue(true), "s": StringValue("fp8"),
			"gpu.name": StringValue("NVIDIA A100-SXM4-80GB"), "engine.version": StringValue("0.11.0"),
		}
		v, ok := m[id]
		return v, ok
	}
	tests := []struct {
		src     string
		want    bool
		wantErr string
	}{
		{"a > b", true, ""},
		{"a % b == 2", true, ""},
		{"a - b * 2 == -2", true, ""},
		{"(a - b) * 2 == 4", true, ""},
		{"!on || a < b", false, ""},
		{"on && s == 'fp8'", true, ""},
		{`s != "auto"`, true, ""},
		{"contains(gpu.name, 'a100')", true, ""},
		{"min(a, b) == 4 && max(a, b) == 6", true, ""},
		{"version_ge('0.10.2') && !version_ge('0.12')", true, ""},
		{"false && missing > 1", false, ""}, // short-circuit protects the right side
		{"1.5e1 == 15", true, ""},
		{"missing > 1", false, "unknown identifier missing"},
		{"a / (b - 4) > 0", false, "division by zero"},
		{"a + on", false, "needs numbers"},
		{"a", false, "not bool"},
		{"s == 1", false, "cannot compare"},
		{"a >", false, "unexpected"},
		{"(a > b", false, "expected )"},
		{"a > b)", false, "unexpected"},
		{"foo(a)", false, "unknown function"},
		{"min(a)", false, "takes 2"},
		{"'open", false, "unterminated"},
		{"a $ b", false, "unexpected character"},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.src)
		var got bool
		if err == nil {
			got, err = e.EvalBool(env)
		}
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.src, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %v, %v; want %v", tt.src, got, err, tt.want)
		}
	}
}

func TestExprNestingLimit(t *testing.T) {
	if _, err := ParseExpr(strings.Repeat("(", 40) + "!" + strings.Repeat("-", 40) + "1" + strings.Repeat(")", 40)); err != nil {
		t.Fatalf("81 levels refused: %v", err)
	}
	if _, err := ParseExpr(strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500)); err == nil {
		t.Fatal("deep nesting accepted")
	}
	if _, err := ParseExpr(strings.Repeat("!", 500) + "true"); err == nil {
		t.Fatal("deep unary nesting accepted")
	}
}
