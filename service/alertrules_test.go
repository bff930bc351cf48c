package service

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/common/model"

	"github.com/vllm-tuner/tuner/gate"
)

// The shipped Prometheus rules parse (as promtool's rule file format:
// groups of rules with alert, expr, for, labels, annotations) and every
// tuner_* series they read is one this service exports.
func TestExampleAlertRules(t *testing.T) {
	const path = "../examples/prometheus/tuner-alerts.yml"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b), yaml.Strict()).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	m.gate.Observe(&gate.Report{Model: "m", Regressions: 1}, time.Now()) // vectors export once set
	m.trials.WithLabelValues("failed", "oom").Inc()
	m.firings.WithLabelValues("nightly", "skipped").Inc()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	series := regexp.MustCompile(`\btuner_[a-z_]+`)
	alerts := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: alert, expr, severity and summary are required", r)
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") || strings.Count(r.Expr, "{") != strings.Count(r.Expr, "}") {
				t.Errorf("%s: unbalanced expression %q", r.Alert, r.Expr)
			}
			for _, s := range series.FindAllString(r.Expr+" "+r.Annotations["description"], -1) {
				if !slices.Contains(names, s) {
					t.Errorf("%s reads %s, which the service does not export (%v)", r.Alert, s, names)
				}
			}
		}
	}
	if alerts < 4 {
		t.Errorf("%d rules", alerts)
	}
	// promtool, where installed, checks the expressions themselves.
	if p, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(p, "check", "rules", path).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
	}
}
