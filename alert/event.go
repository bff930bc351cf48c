package alert

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/common/model"
)

// Kind is what happened.
type Kind string

const (
	KindRegression   Kind = "regression"    // the gate found a regression
	KindRunFailed    Kind = "run_failed"    // a search or benchmark run failed
	KindEngineBroken Kind = "engine_broken" // the engine fails whatever the config
)

// Event is one alert.
type Event struct {
	Kind     Kind              `json:"kind"`
	Severity string            `json:"severity"` // critical, warning
	Summary  string            `json:"summary"`
	Detail   string            `json:"detail,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"` // model, gpu, tier, run, ...
	Time     time.Time         `json:"time"`
	// Source names the tuner command or service that raised it (an
	// Alertmanager generatorURL when it is a URL).
	Source string `json:"source,omitempty"`
}

// Format is the payload shape.
type Format string

const (
	FormatAlertmanager Format = "alertmanager"
	FormatJSON         Format = "json"
)

// ParseFormat reads a --alert-format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatAlertmanager, FormatJSON:
		return f, nil
	case "":
		return FormatAlertmanager, nil
	}
	return "", fmt.Errorf("alert format %q: want alertmanager or json", s)
}

// alertName is the Alertmanager alertname of a kind (TunerRegression).
func alertName(k Kind) string {
	switch k {
	case KindRegression:
		return "TunerRegression"
	case KindRunFailed:
		return "TunerRunFailed"
	case KindEngineBroken:
		return "TunerEngineBroken"
	}
	return "Tuner" + string(k)
}

// Payload renders the event in format f.
func (e Event) Payload(f Format) ([]byte, error) {
	if f != FormatAlertmanager {
		return json.Marshal(e)
	}
	ls := model.LabelSet{"alertname": model.LabelValue(alertName(e.Kind)), "severity": model.LabelValue(e.Severity), "kind": model.LabelValue(e.Kind)}
	for k, v := range e.Labels {
		if model.LabelName(k).IsValidLegacy() { // names every Alertmanager version accepts
			ls[model.LabelName(k)] = model.LabelValue(v)
		}
	}
	ann := model.LabelSet{"summary": model.LabelValue(e.Summary)}
	if e.Detail != "" {
		ann["description"] = model.LabelValue(e.Detail)
	}
	return json.Marshal([]model.Alert{{Labels: ls, Annotations: ann, StartsAt: e.Time, GeneratorURL: e.Source}})
}
