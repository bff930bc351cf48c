package surrogate

import (
	"bytes"
	"fmt"
	"strings"
)

// Import loads an externally trained model: a LightGBM text model (v2/v3)
// or a current XGBoost JSON model, with the schema file it was trained on.
// target names what it predicts: "feasible" for a binary failure
// classifier (its output is P(feasible)), otherwise one of the schema's
// targets, whose transform maps the output back to the metric. The file is
// validated completely before leaves sees anything (XGBoost JSON is first
// converted to LightGBM text); XGBoost's binary formats are refused.
func Import(model []byte, schema *Schema, target string, lim Limits) (*Surrogate, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	var m *lgbModel
	var err error
	format := lgbFormat
	trimmed := bytes.TrimLeft(model, " \t\r\n")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{':
		format = xgbFormat
		m, err = convertXGBoost(model, lim)
	case bytes.IndexByte(model, 0) >= 0 || bytes.HasPrefix(trimmed, []byte("binf")):
		err = modelErr(xgbFormat, -1, "", "binary model files are not read (XGBoost >= 1.0 binaries crash leaves); save the model as JSON")
	default:
		m, err = parseLightGBM(model, lim)
	}
	if err != nil {
		return nil, err
	}
	if m.MaxFeatureIdx+1 != len(schema.Features) {
		return nil, fmt.Errorf("%w: model reads %d features, schema has %d", ErrInvalidModel, m.MaxFeatureIdx+1, len(schema.Features))
	}
	if m.FeatureNames == nil || genericNames(m.FeatureNames) {
		m.FeatureNames = schema.Names()
	}
	p, err := loadModel(m)
	if err != nil {
		return nil, err
	}
	s := &Surrogate{Schema: schema.withoutTargets(), Metrics: TrainMetrics{Origin: "imported:" + format, Members: 1}}
	if target == FeasibilityName {
		s.feas = []*lgbPredictor{p}
	} else {
		o, ok := schema.Target(target)
		if !ok {
			var names []string
			for _, t := range schema.Targets {
				names = append(names, t.Name)
			}
			return nil, fmt.Errorf("%w: schema has no target %q (targets: %s; or %q)", ErrInvalidSchema, target, strings.Join(names, ", "), FeasibilityName)
		}
		s.Objectives = []Objective{o}
		s.models = [][]*lgbPredictor{{p}}
	}
	if err := s.bind(); err != nil {
		return nil, err
	}
	return s, nil
}

// Merge combines surrogates over the same schema: b's objectives are added
// to (or replace those of the same name in) a's, and b's classifier, when
// it has one, replaces a's. Neither input is modified.
func Merge(a, b *Surrogate) (*Surrogate, error) {
	if !a.Schema.Equal(b.Schema) {
		return nil, fmt.Errorf("%w: surrogates have different feature schemas", ErrInvalidSchema)
	}
	s := &Surrogate{Schema: a.Schema, Metrics: a.Metrics, threads: a.threads}
	s.Objectives = append([]Objective(nil), a.Objectives...)
	s.models = append([][]*lgbPredictor(nil), a.models...)
	for k, o := range b.Objectives {
		if i := s.ObjectiveIndex(o.Name); i >= 0 {
			s.Objectives[i], s.models[i] = o, b.models[k]
		} else {
			s.Objectives = append(s.Objectives, o)
			s.models = append(s.models, b.models[k])
		}
	}
	s.feas = a.feas
	if len(b.feas) > 0 {
		s.feas = b.feas
	}
	if err := s.bind(); err != nil {
		return nil, err
	}
	return s, nil
}
