package trial

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/spaces"
)

//go:embed workloads/*.yaml
var builtinWorkloads embed.FS

// BuiltinWorkloads lists the names of the embedded workloads.
func BuiltinWorkloads() []string {
	ents, _ := builtinWorkloads.ReadDir("workloads")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return out
}

// LoadWorkload returns a built-in workload by name ("chat",
// "short-high-concurrency", "long-prefill") or parses a YAML file. A
// ShareGPT dataset it names is loaded too (relative to the file).
func LoadWorkload(nameOrPath string) (Workload, error) {
	if !strings.ContainsAny(nameOrPath, `/\`) && !strings.HasSuffix(nameOrPath, ".yaml") && !strings.HasSuffix(nameOrPath, ".yml") {
		b, err := builtinWorkloads.ReadFile("workloads/" + nameOrPath + ".yaml")
		if err != nil {
			return Workload{}, fmt.Errorf("workload %q: not a built-in (%s) nor a file", nameOrPath, strings.Join(BuiltinWorkloads(), ", "))
		}
		return ParseWorkload("builtin:"+nameOrPath, b)
	}
	b, err := bounded.ReadFile(nameOrPath, bounded.Default().Bytes)
	if err != nil {
		return Workload{}, fmt.Errorf("read workload: %w", err)
	}
	w, err := ParseWorkload(nameOrPath, b)
	if err != nil {
		return w, err
	}
	if w.ShareGPT != "" {
		p := w.ShareGPT
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(nameOrPath), p)
		}
		if err := w.LoadShareGPTFile(p); err != nil {
			return w, err
		}
	}
	return w, nil
}

type rawWorkload struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Prompt      *LengthDist `yaml:"prompt"`
	Output      *LengthDist `yaml:"output"`
	PrefixLen   int         `yaml:"prefix_len"`
	ShareGPT    string      `yaml:"sharegpt"`
	Arrival     *Arrival    `yaml:"arrival"`
	NumRequests int         `yaml:"num_requests"`
	Duration    string      `yaml:"duration"`
	Warmup      int         `yaml:"warmup"`
	Seed        uint64      `yaml:"seed"`
	SLO         string      `yaml:"slo"`
	Levels      []float64   `yaml:"levels"`
	Capacity    bool        `yaml:"capacity"`
	Feedback    bool        `yaml:"feedback"`
	ThinkMS     *LengthDist `yaml:"think_ms"`
	Endpoint    string      `yaml:"endpoint"`
	Tenants     []Tenant    `yaml:"tenants"`
}

// ParseWorkload decodes and validates a workload YAML document (unknown
// fields are errors). Errors are *spaces.FileError naming file, line and
// field. A ShareGPT path is kept, not loaded (see LoadShareGPTFile).
func ParseWorkload(file string, b []byte) (Workload, error) {
	var raw rawWorkload
	if err := bounded.DecodeYAML(file, b, &raw, yaml.Strict()); err != nil {
		return Workload{}, yamlFileError(file, b, err)
	}
	loc := spaces.NewLocator(file, b)
	w := Workload{
		Name: raw.Name, PrefixLen: raw.PrefixLen, ShareGPT: raw.ShareGPT,
		NumRequests: raw.NumRequests, Warmup: raw.Warmup, Seed: raw.Seed,
		Levels: raw.Levels, Capacity: raw.Capacity, Feedback: raw.Feedback, ThinkMS: raw.ThinkMS,
	}
	if w.Name == "" {
		return w, loc.Errf("$.name", "name", "missing")
	}
	if raw.ShareGPT == "" {
		if raw.Prompt == nil {
			return w, loc.Errf("$", "prompt", "missing (or give sharegpt)")
		}
		if raw.Output == nil {
			return w, loc.Errf("$", "output", "missing (or give sharegpt)")
		}
	}
	if raw.Prompt != nil {
		if err := validateDist(loc, "$.prompt", "prompt", *raw.Prompt, 0); err != nil {
			return w, err
		}
		w.Prompt = *raw.Prompt
	}
	if raw.Output != nil {
		if err := validateDist(loc, "$.output", "output", *raw.Output, 0); err != nil {
			return w, err
		}
		w.Output = *raw.Output
	}
	if raw.ThinkMS != nil {
		if err := validateDist(loc, "$.think_ms", "think_ms", *raw.ThinkMS, 0); err != nil {
			return w, err
		}
	}
	if raw.Endpoint != "" {
		e, err := ParseEndpoint(raw.Endpoint)
		if err != nil {
			return w, loc.Errf("$.endpoint", "endpoint", "unknown %q (completions or chat)", raw.Endpoint)
		}
		w.Endpoint = e
	}
	if raw.PrefixLen < 0 {
		return w, loc.Errf("$.prefix_len", "prefix_len", "must be >= 0")
	}
	if raw.Arrival == nil {
		return w, loc.Errf("$", "arrival", "missing")
	}
	w.Arrival = *raw.Arrival
	a := w.Arrival
	switch a.Kind {
	case "closed":
		if w.Feedback {
			return w, loc.Errf("$.feedback", "feedback", "feedback mode drives the request rate: use an open-loop arrival (poisson, gamma or constant)")
		}
		if a.Concurrency <= 0 && len(w.Levels) == 0 && !w.Capacity {
			return w, loc.Errf("$.arrival", "arrival.concurrency", "closed loop needs concurrency > 0")
		}
		if a.Rate != 0 || a.Burstiness != 0 {
			return w, loc.Errf("$.arrival", "arrival", "closed loop takes no rate or burstiness")
		}
	case "poisson", "gamma", "constant":
		if !(a.Rate > 0) && len(w.Levels) == 0 && !w.Capacity && !w.Feedback {
			return w, loc.Errf("$.arrival", "arrival.rate", "open loop needs rate > 0 req/s")
		}
		if a.Kind == "gamma" && !(a.Burstiness > 0) {
			return w, loc.Errf("$.arrival", "arrival.burstiness", "gamma arrivals need burstiness > 0")
		}
		if a.Concurrency != 0 {
			return w, loc.Errf("$.arrival", "arrival.concurrency", "open loop takes no concurrency (use kind: closed)")
		}
		if math.IsInf(a.Rate, 0) || math.IsNaN(a.Rate) {
			return w, loc.Errf("$.arrival.rate", "arrival.rate", "must be finite (use kind: closed for 'inf')")
		}
	case "":
		return w, loc.Errf("$.arrival", "arrival.kind", "missing (poisson, gamma, constant or closed)")
	default:
		return w, loc.Errf("$.arrival.kind", "arrival.kind", "unknown %q (poisson, gamma, constant or closed)", a.Kind)
	}
	if raw.Duration != "" {
		d, err := time.ParseDuration(raw.Duration)
		if err != nil || d <= 0 {
			return w, loc.Errf("$.duration", "duration", "bad duration %q (e.g. 60s, 5m)", raw.Duration)
		}
		w.Duration = d
	}
	if w.NumRequests < 0 {
		return w, loc.Errf("$.num_requests", "num_requests", "must be >= 0")
	}
	if w.NumRequests == 0 && w.Duration == 0 {
		return w, loc.Errf("$", "num_requests", "give num_requests or duration")
	}
	if w.NumRequests > 1_000_000 {
		return w, loc.Errf("$.num_requests", "num_requests", "too many (%d > 1,000,000)", w.NumRequests)
	}
	if w.Warmup < 0 || w.Warmup > 1_000_000 {
		return w, loc.Errf("$.warmup", "warmup", "must be in [0, 1000000]")
	}
	for i, l := range w.Levels {
		if !(l > 0) || math.IsInf(l, 0) {
			return w, loc.Errf(fmt.Sprintf("$.levels[%d]", i), fmt.Sprintf("levels[%d]", i), "must be > 0 and finite")
		}
		if a.Kind == "closed" && l != math.Trunc(l) {
			return w, loc.Errf(fmt.Sprintf("$.levels[%d]", i), fmt.Sprintf("levels[%d]", i), "closed-loop levels are concurrencies (integers)")
		}
	}
	if err := validateTenants(loc, raw.Tenants); err != nil {
		return w, err
	}
	w.Tenants = raw.Tenants
	slo, err := ParseSLO(raw.SLO)
	if err != nil {
		return w, loc.Errf("$.slo", "slo", "%v", err)
	}
	w.SLO = slo
	if w.Capacity && len(w.SLO) == 0 {
		return w, loc.Errf("$.capacity", "capacity", "capacity mode needs an slo")
	}
	if w.Feedback {
		if w.Capacity {
			return w, loc.Errf("$.feedback", "feedback", "feedback and capacity are two load modes: choose one")
		}
		if _, err := FeedbackTarget(w.SLO); err != nil {
			return w, loc.Errf("$.feedback", "feedback", "%v", err)
		}
	}
	return w, nil
}

// validateTenants checks the LoRA tenants: distinct adapter names that
// can be a request's model, positive finite weights, ranks vLLM accepts.
func validateTenants(loc spaces.Locator, ts []Tenant) error {
	seen := map[string]bool{}
	for i, t := range ts {
		path, field := fmt.Sprintf("$.tenants[%d]", i), fmt.Sprintf("tenants[%d]", i)
		switch {
		case t.Name == "" || strings.ContainsAny(t.Name, " \t=\n"):
			return loc.Errf(path, field+".name", "missing or not an adapter name (no spaces or '=')")
		case seen[t.Name]:
			return loc.Errf(path+".name", field+".name", "tenant %q listed twice", t.Name)
		case !(t.Weight > 0) || math.IsInf(t.Weight, 0):
			return loc.Errf(path, field+".weight", "must be > 0 and finite")
		case t.Rank < 0 || t.Rank > 512:
			return loc.Errf(path+".rank", field+".rank", "must be in 1..512 (0: %d)", DefaultLoRARank)
		}
		seen[t.Name] = true
	}
	return nil
}

func validateDist(loc spaces.Locator, path, field string, d LengthDist, depth int) error {
	const maxLen = 1 << 20
	switch d.Kind {
	case "fixed":
		if d.Value < 1 || d.Value > maxLen {
			return loc.Errf(path, field+".value", "fixed length must be in [1, %d]", maxLen)
		}
	case "uniform":
		if d.Min < 1 || d.Max < d.Min || d.Max > maxLen {
			return loc.Errf(path, field, "uniform needs 1 <= min <= max <= %d", maxLen)
		}
	case "normal":
		if !(d.Mean >= 1) || !(d.Std >= 0) || d.Mean > maxLen || d.Std > maxLen || d.Min < 0 || d.Max < 0 || (d.Max > 0 && d.Max < d.Min) || d.Max > maxLen {
			return loc.Errf(path, field, "normal needs mean >= 1, std >= 0, 0 <= min <= max")
		}
	case "zipf":
		if d.Min < 1 || d.Max < d.Min || d.Max > maxLen {
			return loc.Errf(path, field, "zipf needs 1 <= min <= max <= %d", maxLen)
		}
		if !(d.Exponent > 1) || d.Exponent > 100 {
			return loc.Errf(path, field+".exponent", "zipf needs 1 < exponent <= 100")
		}
	case "mixture":
		if len(d.Mixture) == 0 {
			return loc.Errf(path, field+".mixture", "mixture needs components")
		}
		if depth > 3 {
			return loc.Errf(path, field+".mixture", "mixtures nested too deep")
		}
		for i, c := range d.Mixture {
			p := fmt.Sprintf("%s.mixture[%d]", path, i)
			fl := fmt.Sprintf("%s.mixture[%d]", field, i)
			if !(c.Weight > 0) || math.IsInf(c.Weight, 0) {
				return loc.Errf(p, fl+".weight", "weight must be > 0")
			}
			if err := validateDist(loc, p+".dist", fl+".dist", c.Dist, depth+1); err != nil {
				return err
			}
		}
	case "":
		return loc.Errf(path, field+".kind", "missing (fixed, uniform, normal, zipf or mixture)")
	default:
		return loc.Errf(path+".kind", field+".kind", "unknown %q (fixed, uniform, normal, zipf or mixture)", d.Kind)
	}
	if d.Kind != "mixture" && len(d.Mixture) > 0 {
		return loc.Errf(path, field+".mixture", "only for kind: mixture")
	}
	return nil
}

// yamlFileError locates a decoding error without quoting the file (see
// spaces.YAMLError): a path given by mistake must not print its content.
func yamlFileError(file string, b []byte, err error) error { return spaces.YAMLError(file, b, err) }

// ShareGPT filtering, as vLLM bench's is_valid_sequence.
const (
	shareGPTMinTokens   = 4
	shareGPTMaxPrompt   = 1024
	shareGPTMaxTotal    = 2048
	shareGPTCharsPerTok = 4
)

// approxTokens estimates a text's token count (about 4 characters a token).
func approxTokens(s string) int {
	n := len([]rune(s))
	return (n + shareGPTCharsPerTok - 1) / shareGPTCharsPerTok
}

// LoadShareGPTFile loads a ShareGPT-format JSON file into w (see LoadShareGPT).
func (w *Workload) LoadShareGPTFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sharegpt: %w", err)
	}
	defer f.Close()
	if err := w.LoadShareGPT(f); err != nil {
		return fmt.Errorf("sharegpt %s: %w", path, err)
	}
	w.ShareGPT = path
	return nil
}

// LoadShareGPT reads a ShareGPT JSON array ([{"conversations": [{"from":
// "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}, ...]): the
// first human turn is the prompt, the first gpt turn after it the output;
// lengths are estimated at ~4 characters per token and filtered like vLLM
// bench (drop prompt or output < 4 tokens, prompt > 1024, total > 2048).
// Requests then draws (prompt, output) pairs from the kept conversations.
// It streams the array, so multi-GB files work.
func (w *Workload) LoadShareGPT(r io.Reader) error {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) { // its message quotes a character of the file
			return fmt.Errorf("byte %d: not valid JSON", se.Offset)
		}
		return fmt.Errorf("read: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return errors.New("want a JSON array of conversations")
	}
	var pairs [][2]int
	for i := 0; dec.More(); i++ {
		var item struct {
			Conversations []struct {
				From  string `json:"from"`
				Value string `json:"value"`
			} `json:"conversations"`
		}
		if err := dec.Decode(&item); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) { // its message quotes a character of the file
				return fmt.Errorf("conversation %d: byte %d: not valid JSON", i, se.Offset)
			}
			return fmt.Errorf("conversation %d: %w", i, err)
		}
		p, o := -1, -1
		for _, turn := range item.Conversations {
			switch {
			case p < 0 && turn.From == "human":
				p = approxTokens(turn.Value)
			case p >= 0 && o < 0 && turn.From == "gpt":
				o = approxTokens(turn.Value)
			}
		}
		if p < shareGPTMinTokens || o < shareGPTMinTokens || p > shareGPTMaxPrompt || p+o > shareGPTMaxTotal {
			continue
		}
		pairs = append(pairs, [2]int{p, o})
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if len(pairs) == 0 {
		return errors.New("no conversation passes the length filter")
	}
	w.sharegpt = slices.Clip(pairs)
	return nil
}

// ShareGPTPairs is the number of loaded ShareGPT conversations.
func (w *Workload) ShareGPTPairs() int { return len(w.sharegpt) }
