package spaces

import (
	_ "embed"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
)

// GPU holds the datasheet facts of one GPU type. Efficiency factors that a
// performance model needs are not facts and live with that model (package sim).
type GPU struct {
	Name            string   `yaml:"name" json:"name"`
	Aliases         []string `yaml:"aliases,omitempty" json:"aliases,omitempty"`
	MemoryGiB       float64  `yaml:"memory_gib" json:"memory_gib"`             // per device, as CUDA reports it
	BandwidthGBs    float64  `yaml:"bandwidth_gbs" json:"bandwidth_gbs"`       // HBM, GB/s
	BF16TFLOPS      float64  `yaml:"bf16_tflops" json:"bf16_tflops"`           // dense
	FP8TFLOPS       float64  `yaml:"fp8_tflops" json:"fp8_tflops"`             // dense; 0 = no FP8 tensor cores
	InterconnectGBs float64  `yaml:"interconnect_gbs" json:"interconnect_gbs"` // per direction, between GPUs
	// ComputeCapability is CUDA's major.minor (9.0 for Hopper); vLLM's
	// quantization methods state a minimum, and FP8 GEMMs need >= 8.9.
	ComputeCapability float64 `yaml:"compute_capability,omitempty" json:"compute_capability,omitempty"`
}

// Model holds the architecture facts of one model (from its HF config.json).
type Model struct {
	Name                  string   `yaml:"name" json:"name"`
	Aliases               []string `yaml:"aliases,omitempty" json:"aliases,omitempty"`
	ParamsB               float64  `yaml:"params_b" json:"params_b"` // billions of parameters
	Layers                int      `yaml:"layers" json:"layers"`
	Hidden                int      `yaml:"hidden" json:"hidden"`
	Heads                 int      `yaml:"heads" json:"heads"`
	KVHeads               int      `yaml:"kv_heads" json:"kv_heads"`
	HeadDim               int      `yaml:"head_dim" json:"head_dim"`
	Intermediate          int      `yaml:"intermediate" json:"intermediate"`
	Vocab                 int      `yaml:"vocab" json:"vocab"`
	MaxPositionEmbeddings int      `yaml:"max_position_embeddings" json:"max_position_embeddings"`
	DtypeBytes            float64  `yaml:"dtype_bytes" json:"dtype_bytes"` // weights, 2 for BF16
	// Mixture of experts (0 for a dense model): experts per layer, experts
	// each token goes through, and the parameters one token uses.
	Experts         int     `yaml:"experts,omitempty" json:"experts,omitempty"`
	ExpertsPerToken int     `yaml:"experts_per_token,omitempty" json:"experts_per_token,omitempty"`
	ActiveParamsB   float64 `yaml:"active_params_b,omitempty" json:"active_params_b,omitempty"`
	// Quantization is the method of a pre-quantized checkpoint
	// (config.json quantization_config.quant_method: awq, gptq, fp8; "" for
	// a checkpoint in DtypeBytes), QuantBits its weight width (0: the
	// method's usual, 4 for awq/gptq and 8 for fp8).
	Quantization string `yaml:"quantization,omitempty" json:"quantization,omitempty"`
	QuantBits    int    `yaml:"quant_bits,omitempty" json:"quant_bits,omitempty"`
}

// ActiveParams is the number of parameters (billions) one token goes
// through: all of them for a dense model, the routed experts' for a MoE.
func (m Model) ActiveParams() float64 {
	if m.ActiveParamsB > 0 {
		return m.ActiveParamsB
	}
	return m.ParamsB
}

// ExpertShare is the fraction of the parameters in the routed experts (0
// for a dense model): with E experts of x parameters, k per token,
// total = shared + E*x and active = shared + k*x.
func (m Model) ExpertShare() float64 {
	if m.Experts == 0 || m.ExpertsPerToken >= m.Experts || m.ActiveParamsB <= 0 || m.ParamsB <= 0 {
		return 0
	}
	e, k := float64(m.Experts), float64(m.ExpertsPerToken)
	return e * (m.ParamsB - m.ActiveParamsB) / (e - k) / m.ParamsB
}

// ShardBytes is what one GPU holds of weights totalling total bytes: a TP
// rank's share, and with expert parallelism the routed experts split over
// all TP x DP GPUs instead of copied to every DP replica (vLLM's
// --enable-expert-parallel). The engine and the roofline read it alike.
func (m Model) ShardBytes(total float64, tp, dp int, expertParallel bool) float64 {
	t := float64(max(tp, 1))
	if shared, experts := m.SplitExperts(total); expertParallel && experts > 0 {
		return shared/t + experts/(t*float64(max(dp, 1)))
	}
	return total / t
}

// SplitExperts splits weights of total bytes into the part every token
// reads (attention, embeddings, shared experts, router) and the routed
// experts (ExpertShare of them; 0 for a dense model).
func (m Model) SplitExperts(total float64) (shared, experts float64) {
	share := m.ExpertShare()
	return total * (1 - share), total * share
}

// DispatchBytes is what expert parallelism over gpus GPUs sends of one
// token in one layer, each way (the dispatch, and as much in the combine):
// its hidden state, elem bytes an element, to its k experts' GPUs, of which
// (gpus-1)/gpus are other GPUs. The engine and the roofline read it alike.
func (m Model) DispatchBytes(gpus int, elem float64) float64 {
	w := float64(max(gpus, 1))
	return (w - 1) / w * float64(m.ExpertsPerToken) * float64(m.Hidden) * elem
}

// ProfileActivationBytes is the activation peak of vLLM's start-up profile
// run on one GPU: a forward pass of tokens tokens (the MLP's gate and up
// projections, 2 x intermediate per token, and a few hidden-size buffers,
// in elem-byte activations split over tp) or the sampler's pass over seqs
// rows of fp32 logits and probabilities, whichever is larger.
func (m Model) ProfileActivationBytes(tokens, seqs int, elem float64, tp int) float64 {
	fwdPerToken := float64(2*m.Intermediate+4*m.Hidden) * elem / float64(max(tp, 1))
	fwd := float64(tokens) * fwdPerToken
	sampler := float64(seqs) * float64(m.Vocab) * 8
	return math.Max(fwd, sampler)
}

// WeightBytes is the size of the checkpoint's weights on all GPUs
// together (quantized ones at their width).
func (m Model) WeightBytes() float64 { return m.WeightBytesAs(m.Quantization) }

// WeightBytesAs is the size of the weights served with a quantization
// method ("" or "auto": the checkpoint's own). The linear layers take the
// method's width plus its scales (one fp16 scale per group of 128 weights
// for the 4-bit methods); embeddings and the LM head stay in DtypeBytes,
// as vLLM leaves them unquantized.
func (m Model) WeightBytesAs(method string) float64 {
	if method == "" || method == "auto" {
		method = m.Quantization
	}
	per := QuantWeightBytes(method, m.QuantBits)
	if per == 0 {
		return m.ParamsB * 1e9 * m.DtypeBytes
	}
	embed := 2 * float64(m.Vocab) * float64(m.Hidden)
	linear := math.Max(0, m.ParamsB*1e9-embed)
	return linear*per + embed*m.DtypeBytes
}

// QuantWeightBytes is the bytes per linear-layer weight of a vLLM
// quantization method (bits 0: the method's usual width), 0 for none or a
// method these facts do not describe.
func QuantWeightBytes(method string, bits int) float64 {
	switch QuantFamily(method) {
	case "fp8":
		return 1
	case "awq", "gptq":
		if bits <= 0 {
			bits = 4
		}
		return float64(bits)/8 + 2.0/128 // fp16 scale per group of 128
	}
	return 0
}

// QuantFamily maps a vLLM --quantization value to its checkpoint format:
// awq_marlin is an awq checkpoint run by the Marlin kernel, gptq_marlin
// likewise; "" for none.
func QuantFamily(method string) string {
	switch method {
	case "fp8":
		return "fp8"
	case "awq", "awq_marlin":
		return "awq"
	case "gptq", "gptq_marlin":
		return "gptq"
	}
	return ""
}

// KVBytesPerToken is 2 (K and V) x layers x kv_heads x head_dim x bytes per
// element, for the whole model (divide by TP for one GPU while TP <= kv_heads).
func (m Model) KVBytesPerToken(elemBytes float64) float64 {
	return 2 * float64(m.Layers*m.KVHeads*m.HeadDim) * elemBytes
}

// Catalog is a set of GPU and model profiles.
type Catalog struct {
	GPUs   []GPU   `yaml:"gpus" json:"gpus"`
	Models []Model `yaml:"models" json:"models"`
}

//go:embed catalog.yaml
var catalogYAML []byte

// DefaultCatalog returns the embedded profiles. Each call returns a fresh copy.
func DefaultCatalog() *Catalog {
	c, err := parseCatalog("catalog.yaml", catalogYAML)
	if err != nil {
		panic("embedded catalog: " + err.Error()) // a build defect, caught by tests
	}
	return c
}

// LoadCatalogFile reads a user profile file (same schema as the embedded
// catalog) and returns the default catalog with its entries added; an entry
// with the name of an existing one replaces it.
func LoadCatalogFile(path string) (*Catalog, error) {
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return nil, fmt.Errorf("read profiles: %w", err)
	}
	add, err := parseCatalog(path, b)
	if err != nil {
		return nil, err
	}
	c := DefaultCatalog()
	c.Merge(add)
	return c, nil
}

// Merge adds or replaces the profiles of o in c.
func (c *Catalog) Merge(o *Catalog) {
	for _, g := range o.GPUs {
		if i := indexByName(len(c.GPUs), func(i int) string { return c.GPUs[i].Name }, g.Name); i >= 0 {
			c.GPUs[i] = g
		} else {
			c.GPUs = append(c.GPUs, g)
		}
	}
	for _, m := range o.Models {
		if i := indexByName(len(c.Models), func(i int) string { return c.Models[i].Name }, m.Name); i >= 0 {
			c.Models[i] = m
		} else {
			c.Models = append(c.Models, m)
		}
	}
}

func indexByName(n int, name func(int) string, want string) int {
	for i := 0; i < n; i++ {
		if strings.EqualFold(name(i), want) {
			return i
		}
	}
	return -1
}

func parseCatalog(file string, b []byte) (*Catalog, error) {
	var c Catalog
	if err := bounded.DecodeYAML(file, b, &c, yaml.Strict()); err != nil {
		return nil, YAMLError(file, b, err)
	}
	for i, g := range c.GPUs {
		where := fmt.Sprintf("gpus[%d]", i)
		switch {
		case g.Name == "":
			return nil, &FileError{File: file, Field: where + ".name", Msg: "missing"}
		case g.MemoryGiB <= 0:
			return nil, &FileError{File: file, Field: where + ".memory_gib", Msg: "must be > 0"}
		case g.BandwidthGBs <= 0:
			return nil, &FileError{File: file, Field: where + ".bandwidth_gbs", Msg: "must be > 0"}
		case g.BF16TFLOPS <= 0:
			return nil, &FileError{File: file, Field: where + ".bf16_tflops", Msg: "must be > 0"}
		case g.FP8TFLOPS < 0 || g.InterconnectGBs < 0 || g.ComputeCapability < 0:
			return nil, &FileError{File: file, Field: where, Msg: "fp8_tflops, interconnect_gbs and compute_capability must be >= 0"}
		}
	}
	for i, m := range c.Models {
		where := fmt.Sprintf("models[%d]", i)
		switch {
		case m.Name == "":
			return nil, &FileError{File: file, Field: where + ".name", Msg: "missing"}
		case m.ParamsB <= 0:
			return nil, &FileError{File: file, Field: where + ".params_b", Msg: "must be > 0"}
		case m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 || m.KVHeads <= 0 || m.HeadDim <= 0:
			return nil, &FileError{File: file, Field: where, Msg: "layers, hidden, heads, kv_heads and head_dim must be > 0"}
		case m.Heads%m.KVHeads != 0:
			return nil, &FileError{File: file, Field: where + ".kv_heads", Msg: "must divide heads"}
		case m.MaxPositionEmbeddings <= 0:
			return nil, &FileError{File: file, Field: where + ".max_position_embeddings", Msg: "must be > 0"}
		case m.DtypeBytes <= 0:
			return nil, &FileError{File: file, Field: where + ".dtype_bytes", Msg: "must be > 0"}
		case m.Experts < 0 || m.ExpertsPerToken < 0 || m.ExpertsPerToken > m.Experts || m.ActiveParamsB < 0 || m.ActiveParamsB > m.ParamsB:
			return nil, &FileError{File: file, Field: where, Msg: "experts_per_token must be in 0..experts and active_params_b in 0..params_b"}
		case m.Quantization != "" && QuantWeightBytes(m.Quantization, m.QuantBits) == 0:
			return nil, &FileError{File: file, Field: where + ".quantization", Msg: "unknown method (want awq, gptq or fp8)"}
		case m.QuantBits < 0 || m.QuantBits > 8:
			return nil, &FileError{File: file, Field: where + ".quant_bits", Msg: "must be in 0..8"}
		}
	}
	return &c, nil
}

// ErrUnknownProfile is returned when a GPU or model name is not in the catalog.
var ErrUnknownProfile = fmt.Errorf("unknown profile")

// GPU finds a GPU by name or alias (case-insensitive).
func (c *Catalog) GPU(name string) (GPU, error) {
	for _, g := range c.GPUs {
		if matches(name, g.Name, g.Aliases) {
			return g, nil
		}
	}
	return GPU{}, fmt.Errorf("gpu %q: %w (known: %s)", name, ErrUnknownProfile, knownNames(c.GPUs, func(g GPU) string { return g.Name }))
}

// Model finds a model by name, alias or HF id (case-insensitive); for an HF id
// "org/name" the part after the slash is tried too.
func (c *Catalog) Model(name string) (Model, error) {
	for _, m := range c.Models {
		if matches(name, m.Name, m.Aliases) {
			return m, nil
		}
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		base := strings.TrimSuffix(name[i+1:], "-Instruct")
		for _, m := range c.Models {
			if matches(base, m.Name, m.Aliases) {
				return m, nil
			}
		}
	}
	return Model{}, fmt.Errorf("model %q: %w (known: %s)", name, ErrUnknownProfile, knownNames(c.Models, func(m Model) string { return m.Name }))
}

// Target looks up a model and a GPU (as Model and GPU do) and returns the
// target of gpus of those GPUs (at least 1), with the model's own maximum
// length and the engine version unset.
func (c *Catalog) Target(model, gpu string, gpus int) (Target, error) {
	m, err := c.Model(model)
	if err != nil {
		return Target{}, err
	}
	g, err := c.GPU(gpu)
	if err != nil {
		return Target{}, err
	}
	return Target{Model: m, GPU: g, GPUCount: max(1, gpus)}, nil
}

func matches(q, name string, aliases []string) bool {
	if strings.EqualFold(q, name) {
		return true
	}
	for _, a := range aliases {
		if strings.EqualFold(q, a) {
			return true
		}
	}
	return false
}

// knownNames is the names of a catalog's entries, sorted, for an unknown
// profile's error.
func knownNames[T any](entries []T, name func(T) string) string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = name(e)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
