package trial

import (
	"math"
	"math/rand/v2"
	"time"
)

// LengthDist is a distribution of token counts.
type LengthDist struct {
	Kind  string  `yaml:"kind" json:"kind"` // fixed | uniform | normal | zipf | mixture
	Value int     `yaml:"value,omitempty" json:"value,omitempty"`
	Min   int     `yaml:"min,omitempty" json:"min,omitempty"`
	Max   int     `yaml:"max,omitempty" json:"max,omitempty"`
	Mean  float64 `yaml:"mean,omitempty" json:"mean,omitempty"`
	Std   float64 `yaml:"std,omitempty" json:"std,omitempty"`
	// Exponent of a zipf distribution (> 1): P(min+k) is proportional to
	// (1+k)^-exponent for k in [0, max-min].
	Exponent float64     `yaml:"exponent,omitempty" json:"exponent,omitempty"`
	Mixture  []Component `yaml:"mixture,omitempty" json:"mixture,omitempty"`
}

// Component is one weighted part of a mixture.
type Component struct {
	Weight float64    `yaml:"weight" json:"weight"`
	Dist   LengthDist `yaml:"dist" json:"dist"`
}

// Sample draws one length (>= 1).
func (d LengthDist) Sample(r *rand.Rand) int {
	var n int
	switch d.Kind {
	case "uniform":
		n = d.Min
		if d.Max > d.Min {
			n += r.IntN(d.Max - d.Min + 1)
		}
	case "normal":
		n = int(math.Round(d.Mean + d.Std*r.NormFloat64()))
		if d.Min > 0 && n < d.Min {
			n = d.Min
		}
		if d.Max > 0 && n > d.Max {
			n = d.Max
		}
	case "zipf":
		n = d.Min + int(rand.NewZipf(r, d.Exponent, 1, uint64(d.Max-d.Min)).Uint64())
	case "mixture":
		var total float64
		for _, c := range d.Mixture {
			total += c.Weight
		}
		u := r.Float64() * total
		for i, c := range d.Mixture {
			u -= c.Weight
			if u < 0 || i == len(d.Mixture)-1 {
				return c.Dist.Sample(r)
			}
		}
	default: // fixed
		n = d.Value
	}
	return max(1, n)
}

// MeanValue is the distribution's mean (used for features and estimates).
func (d LengthDist) MeanValue() float64 {
	switch d.Kind {
	case "uniform":
		return float64(d.Min+d.Max) / 2
	case "normal":
		return d.Mean
	case "zipf":
		var z, sum float64
		for k := 0; k <= d.Max-d.Min; k++ {
			p := math.Pow(float64(1+k), -d.Exponent)
			z += p
			sum += p * float64(d.Min+k)
		}
		return sum / z
	case "mixture":
		var total, sum float64
		for _, c := range d.Mixture {
			total += c.Weight
			sum += c.Weight * c.Dist.MeanValue()
		}
		if total == 0 {
			return 0
		}
		return sum / total
	}
	return float64(d.Value)
}

// MaxValue is an upper bound of the distribution (normal: mean + 4 std, or Max).
func (d LengthDist) MaxValue() int {
	switch d.Kind {
	case "uniform", "zipf":
		return d.Max
	case "normal":
		if d.Max > 0 {
			return d.Max
		}
		return int(math.Ceil(d.Mean + 4*d.Std))
	case "mixture":
		m := 0
		for _, c := range d.Mixture {
			m = max(m, c.Dist.MaxValue())
		}
		return m
	}
	return d.Value
}

// Arrival is the request arrival process.
type Arrival struct {
	Kind        string  `yaml:"kind" json:"kind"`                                   // poisson | gamma | constant | closed
	Rate        float64 `yaml:"rate,omitempty" json:"rate,omitempty"`               // req/s (open loop)
	Burstiness  float64 `yaml:"burstiness,omitempty" json:"burstiness,omitempty"`   // gamma shape; 1 = Poisson
	Concurrency int     `yaml:"concurrency,omitempty" json:"concurrency,omitempty"` // closed loop
}

// Closed reports whether requests are driven by a fixed concurrency.
func (a Arrival) Closed() bool { return a.Kind == "closed" }

// Workload is a benchmark definition: what requests, how they arrive, how
// long to measure and which SLOs apply.
type Workload struct {
	Name        string        `yaml:"name" json:"name"`
	Prompt      LengthDist    `yaml:"prompt" json:"prompt"`
	Output      LengthDist    `yaml:"output" json:"output"`
	PrefixLen   int           `yaml:"prefix_len,omitempty" json:"prefix_len,omitempty"` // shared prefix tokens at the start of every prompt
	ShareGPT    string        `yaml:"sharegpt,omitempty" json:"sharegpt,omitempty"`     // path of a ShareGPT JSON file (replaces Prompt/Output)
	Arrival     Arrival       `yaml:"arrival" json:"arrival"`
	NumRequests int           `yaml:"num_requests,omitempty" json:"num_requests,omitempty"`
	Duration    time.Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	Warmup      int           `yaml:"warmup,omitempty" json:"warmup,omitempty"` // requests excluded from the metrics
	Seed        uint64        `yaml:"seed,omitempty" json:"seed,omitempty"`
	SLO         SLO           `yaml:"-" json:"slo,omitempty"`
	// Levels, when set, are the load levels one engine start serves
	// (concurrencies for closed loop, rates for open loop).
	Levels []float64 `yaml:"levels,omitempty" json:"levels,omitempty"`
	// Capacity asks the trial to find the highest level meeting the SLOs.
	Capacity bool `yaml:"capacity,omitempty" json:"capacity,omitempty"`
	// Feedback asks the trial to hold the SLO's first latency bound by
	// feedback (HoldSLO): the open-loop rate rises and falls window by
	// window, and the load sustained at the bound is the answer.
	Feedback bool `yaml:"feedback,omitempty" json:"feedback,omitempty"`
	// ThinkMS, when set, is a closed-loop user's pause after each response
	// in milliseconds (locust's wait_time).
	ThinkMS *LengthDist `yaml:"think_ms,omitempty" json:"think_ms,omitempty"`
	// Endpoint is the API the load is sent to ("" or completions, chat).
	Endpoint Endpoint `yaml:"endpoint,omitempty" json:"endpoint,omitempty"`
	// Tenants, when set, spread the requests over LoRA adapters by weight:
	// each request names its tenant's adapter as its model, and the engine
	// serves them with --enable-lora --lora-modules.
	Tenants []Tenant `yaml:"tenants,omitempty" json:"tenants,omitempty"`

	// sharegpt holds the loaded ShareGPT pairs (prompt, output lengths).
	sharegpt [][2]int
}

// Tenant is one LoRA adapter a workload's requests go to.
type Tenant struct {
	Name   string  `yaml:"name" json:"name"`     // the adapter's served name: the requests' model
	Weight float64 `yaml:"weight" json:"weight"` // relative share of the requests
	// Path is the adapter directory for --lora-modules NAME=PATH (default:
	// the name); Rank its LoRA rank r (0: DefaultLoRARank), which
	// max_lora_rank must hold.
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	Rank int    `yaml:"rank,omitempty" json:"rank,omitempty"`
}

// DefaultLoRARank is a tenant's rank when the workload does not say (PEFT's
// usual r, and vLLM's default max_lora_rank).
const DefaultLoRARank = 16

// AdapterPath is the directory served for the tenant.
func (t Tenant) AdapterPath() string {
	if t.Path != "" {
		return t.Path
	}
	return t.Name
}

// AdapterRank is the tenant's rank, DefaultLoRARank when unset.
func (t Tenant) AdapterRank() int {
	if t.Rank > 0 {
		return t.Rank
	}
	return DefaultLoRARank
}

// MaxLoRARank is the largest rank of the workload's tenants (0 without).
func (w *Workload) MaxLoRARank() int {
	r := 0
	for _, t := range w.Tenants {
		r = max(r, t.AdapterRank())
	}
	return r
}

// LoRAArgs are the engine arguments that serve the tenants' adapters
// (none without tenants): --enable-lora --lora-modules NAME=PATH ...
func (w *Workload) LoRAArgs() []string {
	if len(w.Tenants) == 0 {
		return nil
	}
	out := []string{"--enable-lora", "--lora-modules"}
	for _, t := range w.Tenants {
		out = append(out, t.Name+"="+t.AdapterPath())
	}
	return out
}

// RequestSpec is one request of a workload run.
type RequestSpec struct {
	Index     int           `json:"index"`
	At        time.Duration `json:"at"` // arrival offset (open loop; 0 in closed loop)
	PromptLen int           `json:"prompt_len"`
	OutputLen int           `json:"output_len"`
	PrefixLen int           `json:"prefix_len,omitempty"` // leading tokens shared by all requests
	Warmup    bool          `json:"warmup,omitempty"`
	Think     time.Duration `json:"think,omitempty"`  // closed loop: the user's pause after this request
	Tenant    string        `json:"tenant,omitempty"` // LoRA adapter sent as the model ("" for the base model)
}

// Class is the prompt-length class used for per-class metrics.
func (r RequestSpec) Class() string { return PromptClass(r.PromptLen) }

// PromptBuckets bound the prompt-length classes: short < Short <= medium
// <= Medium < long. Trials' and benchmark runs' breakdowns share them.
type PromptBuckets struct {
	Short  int `yaml:"short" json:"short"`
	Medium int `yaml:"medium" json:"medium"`
}

// DefaultPromptBuckets are short < 256, medium 256-2048, long > 2048 tokens.
func DefaultPromptBuckets() PromptBuckets { return PromptBuckets{Short: 256, Medium: 2048} }

// Class buckets a prompt length.
func (b PromptBuckets) Class(n int) string {
	switch {
	case n < b.Short:
		return "short"
	case n <= b.Medium:
		return "medium"
	}
	return "long"
}

// PromptClass buckets a prompt length by DefaultPromptBuckets.
func PromptClass(n int) string { return DefaultPromptBuckets().Class(n) }

// Requests generates the request sequence, deterministic for the seed: the
// warm-up requests first, then NumRequests measured ones. Arrival offsets
// follow vLLM bench: gamma-distributed gaps with shape = burstiness and
// mean 1/rate (Poisson for burstiness 1), constant gaps for "constant".
func (w *Workload) Requests() []RequestSpec {
	r := rand.New(rand.NewPCG(w.Seed, 0x7475_6e65_72))
	n := w.Warmup + w.NumRequests
	out := make([]RequestSpec, n)
	// Tenants draw from their own stream so that the lengths and arrivals
	// are those of the same workload without tenants.
	tr := rand.New(rand.NewPCG(w.Seed, 0x6c6f7261))
	var tw float64
	for _, t := range w.Tenants {
		tw += t.Weight
	}
	var at float64
	for i := range out {
		var p, o int
		if len(w.sharegpt) > 0 {
			pair := w.sharegpt[r.IntN(len(w.sharegpt))]
			p, o = pair[0], pair[1]
		} else {
			p, o = w.Prompt.Sample(r), w.Output.Sample(r)
		}
		p += w.PrefixLen
		out[i] = RequestSpec{Index: i, PromptLen: p, OutputLen: o, PrefixLen: w.PrefixLen, Warmup: i < w.Warmup}
		if len(w.Tenants) > 0 {
			u := tr.Float64() * tw
			for k, t := range w.Tenants {
				if u -= t.Weight; u < 0 || k == len(w.Tenants)-1 {
					out[i].Tenant = t.Name
					break
				}
			}
		}
		if w.ThinkMS != nil && w.Arrival.Closed() {
			// Drawn only when set, so other workloads keep their sequences.
			out[i].Think = time.Duration(w.ThinkMS.Sample(r)) * time.Millisecond
		}
		if !w.Arrival.Closed() && w.Arrival.Rate > 0 {
			out[i].At = time.Duration(at * float64(time.Second))
			at += gap(r, w.Arrival)
		}
	}
	return out
}

func gap(r *rand.Rand, a Arrival) float64 {
	mean := 1 / a.Rate
	switch a.Kind {
	case "constant":
		return mean
	case "gamma":
		k := a.Burstiness
		if k <= 0 {
			k = 1
		}
		return gammaSample(r, k) * mean / k
	default: // poisson
		return r.ExpFloat64() * mean
	}
}

// gammaSample draws Gamma(k, 1) with Marsaglia-Tsang (boosted for k < 1).
func gammaSample(r *rand.Rand, k float64) float64 {
	if k < 1 {
		return gammaSample(r, k+1) * math.Pow(r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
