package spaces

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vllm-tuner/tuner/bounded"
)

// hfConfig holds the fields of a Hugging Face config.json that the model
// facts come from, under the names transformers writes. Multimodal configs
// nest the language model under text_config.
type hfConfig struct {
	ModelType          string    `json:"model_type"`
	Layers             int       `json:"num_hidden_layers"`
	Hidden             int       `json:"hidden_size"`
	Heads              int       `json:"num_attention_heads"`
	KVHeads            *int      `json:"num_key_value_heads"`
	HeadDim            *int      `json:"head_dim"`
	Intermediate       int       `json:"intermediate_size"`
	Vocab              int       `json:"vocab_size"`
	MaxPositions       int       `json:"max_position_embeddings"`
	TorchDtype         string    `json:"torch_dtype"`
	Dtype              string    `json:"dtype"` // transformers >= 4.56 writes dtype
	TieEmbeddings      *bool     `json:"tie_word_embeddings"`
	LocalExperts       int       `json:"num_local_experts"` // Mixtral
	Experts            int       `json:"num_experts"`       // Qwen2-MoE, Qwen3-MoE
	ExpertsPerToken    int       `json:"num_experts_per_tok"`
	MoEIntermediate    int       `json:"moe_intermediate_size"`
	SharedIntermediate int       `json:"shared_expert_intermediate_size"`
	RoutedExperts      int       `json:"n_routed_experts"` // DeepSeek: not modelled
	KVLoraRank         int       `json:"kv_lora_rank"`     // MLA attention: not modelled
	TextConfig         *hfConfig `json:"text_config"`
	Quant              *struct {
		Method string `json:"quant_method"`
		Bits   int    `json:"bits"`
	} `json:"quantization_config"`
}

// dtypeBytes are the bytes per weight of the dtypes config.json names.
var dtypeBytes = map[string]float64{
	"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4,
}

// ParseHFConfig reads a Hugging Face config.json into model facts named
// name. The parameter count is computed from the architecture (embeddings,
// attention, gated MLP or experts), so a catalog profile and a config.json
// of the same model agree. Errors locate the field, never quote the file.
func ParseHFConfig(file, name string, b []byte) (Model, error) {
	var c hfConfig
	if err := bounded.CheckJSON(file, b, bounded.Default()); err != nil {
		return Model{}, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return Model{}, &FileError{File: file, Line: lineAt(b, se.Offset), Msg: "not a JSON config.json"}
		case errors.As(err, &te):
			return Model{}, &FileError{File: file, Line: lineAt(b, te.Offset), Field: te.Field, Msg: "wrong type (want " + te.Type.String() + ")"}
		}
		return Model{}, &FileError{File: file, Msg: "not a JSON config.json"}
	}
	if c.Layers == 0 && c.TextConfig != nil {
		c = *c.TextConfig
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"num_hidden_layers", c.Layers}, {"hidden_size", c.Hidden}, {"num_attention_heads", c.Heads},
		{"intermediate_size", max(c.Intermediate, c.MoEIntermediate)}, {"vocab_size", c.Vocab}, {"max_position_embeddings", c.MaxPositions}} {
		if f.v <= 0 {
			return Model{}, &FileError{File: file, Field: f.name, Msg: "missing or not > 0 (not a decoder language model config?)"}
		}
	}
	m := Model{Name: name, Layers: c.Layers, Hidden: c.Hidden, Heads: c.Heads, KVHeads: c.Heads,
		Intermediate: c.Intermediate, Vocab: c.Vocab, MaxPositionEmbeddings: c.MaxPositions, DtypeBytes: 2}
	if c.KVHeads != nil {
		m.KVHeads = *c.KVHeads
	}
	m.HeadDim = c.Hidden / c.Heads
	if c.HeadDim != nil && *c.HeadDim > 0 {
		m.HeadDim = *c.HeadDim
	}
	if m.KVHeads <= 0 || m.Heads%m.KVHeads != 0 {
		return Model{}, &FileError{File: file, Field: "num_key_value_heads", Msg: "must be > 0 and divide num_attention_heads"}
	}
	if m.HeadDim <= 0 {
		return Model{}, &FileError{File: file, Field: "head_dim", Msg: "must be > 0"}
	}
	dt := c.TorchDtype
	if dt == "" {
		dt = c.Dtype
	}
	if dt != "" {
		b, ok := dtypeBytes[dt]
		if !ok {
			return Model{}, &FileError{File: file, Field: "torch_dtype", Msg: "unsupported dtype (want bfloat16, float16 or float32)"}
		}
		m.DtypeBytes = b
	}
	// Architectures whose memory or compute these facts cannot describe are
	// refused rather than guessed: MLA's compressed KV cache, DeepSeek's
	// routed plus dense layers.
	if c.KVLoraRank > 0 || c.RoutedExperts > 0 {
		return Model{}, &FileError{File: file, Field: "kv_lora_rank/n_routed_experts", Msg: "MLA attention and DeepSeek-style experts are not modelled: describe the model with --profiles"}
	}
	m.Experts = max(c.LocalExperts, c.Experts)
	if m.Experts == 0 && c.ExpertsPerToken > 0 {
		return Model{}, &FileError{File: file, Field: "num_experts_per_tok", Msg: "experts per token without a known expert count (num_local_experts or num_experts)"}
	}
	m.ExpertsPerToken = c.ExpertsPerToken
	if m.Experts > 0 && (m.ExpertsPerToken <= 0 || m.ExpertsPerToken > m.Experts) {
		return Model{}, &FileError{File: file, Field: "num_experts_per_tok", Msg: "must be in 1..the number of experts"}
	}
	if q := c.Quant; q != nil && q.Method != "" {
		if QuantWeightBytes(q.Method, q.Bits) == 0 || q.Bits < 0 || q.Bits > 8 {
			return Model{}, &FileError{File: file, Field: "quantization_config", Msg: "quant_method must be awq, gptq or fp8 with bits in 1..8 (other methods are not modelled: describe the model with --profiles)"}
		}
		m.Quantization, m.QuantBits = QuantFamily(q.Method), q.Bits
	}
	total, active := c.params(m)
	m.ParamsB = roundTo(total/1e9, 0.01)
	if m.Experts > 0 {
		m.ActiveParamsB = roundTo(active/1e9, 0.01)
	}
	return m, nil
}

// params counts the weights: embeddings (twice unless tied), per layer the
// attention projections and a gated MLP (three matrices) or, for a mixture
// of experts, every expert's MLP plus the router; active counts the experts
// one token goes through.
func (c hfConfig) params(m Model) (total, active float64) {
	h := float64(m.Hidden)
	embed := float64(m.Vocab) * h
	if c.TieEmbeddings == nil || !*c.TieEmbeddings {
		embed *= 2
	}
	attn := h*float64(m.Heads*m.HeadDim)*2 + 2*h*float64(m.KVHeads*m.HeadDim)
	mlp := 3 * h * float64(m.Intermediate)
	layerTotal, layerActive := attn+mlp, attn+mlp
	if m.Experts > 0 {
		inter := c.MoEIntermediate
		if inter == 0 {
			inter = m.Intermediate
		}
		expert := 3 * h * float64(inter)
		shared := 3 * h * float64(c.SharedIntermediate)
		router := h * float64(m.Experts)
		layerTotal = attn + float64(m.Experts)*expert + shared + router
		layerActive = attn + float64(m.ExpertsPerToken)*expert + shared + router
	}
	n := float64(m.Layers)
	return embed + n*layerTotal, embed + n*layerActive
}

// lineAt is the 1-based line of a byte offset.
func lineAt(b []byte, off int64) int {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	return 1 + strings.Count(string(b[:max(0, off)]), "\n")
}

// HFCacheDir is the Hugging Face hub cache as huggingface_hub finds it:
// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
func HFCacheDir(getenv func(string) string, home string) string {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// ErrNoHFConfig is returned by FindHFConfig when no config.json is found.
var ErrNoHFConfig = errors.New("no config.json")

// FindHFConfig returns the config.json of a model given as a local
// directory or as a Hugging Face id in the hub cache
// (models--ORG--NAME/snapshots/REV/config.json: the revision refs/main
// names, else the newest snapshot).
func FindHFConfig(model, cacheDir string) (string, error) {
	if st, err := os.Stat(model); err == nil && st.IsDir() {
		p := filepath.Join(model, "config.json")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w in directory %s", ErrNoHFConfig, model)
		}
		return p, nil
	}
	if filepath.IsAbs(model) || strings.HasPrefix(model, ".") || strings.HasPrefix(model, "~") {
		return "", fmt.Errorf("%w: no directory %s", ErrNoHFConfig, model)
	}
	if cacheDir == "" || strings.Count(model, "/") != 1 || strings.Contains(model, "..") {
		return "", fmt.Errorf("%w for %s (not a local directory, not an ORG/NAME id)", ErrNoHFConfig, model)
	}
	repo := filepath.Join(cacheDir, "models--"+strings.ReplaceAll(model, "/", "--"))
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err == nil {
		p := filepath.Join(repo, "snapshots", strings.TrimSpace(string(ref)), "config.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(repo, "snapshots", "*", "config.json"))
	if len(snaps) == 0 {
		return "", fmt.Errorf("%w for %s in the Hugging Face cache %s", ErrNoHFConfig, model, cacheDir)
	}
	sort.Slice(snaps, func(i, j int) bool { return modTime(snaps[i]) > modTime(snaps[j]) })
	return snaps[0], nil
}

func modTime(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.ModTime().UnixNano()
}

// LoadHFModel finds and reads the config.json of a model (see FindHFConfig).
func LoadHFModel(model, cacheDir string) (Model, string, error) {
	p, err := FindHFConfig(model, cacheDir)
	if err != nil {
		return Model{}, "", err
	}
	b, err := bounded.ReadFile(p, bounded.Default().Bytes)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, bounded.ErrLimit) {
			return Model{}, p, fmt.Errorf("read %s: %w", p, err)
		}
		return Model{}, p, fmt.Errorf("read config.json: %w", err)
	}
	name := model
	if st, err := os.Stat(model); err == nil && st.IsDir() {
		name = filepath.Base(filepath.Clean(model))
	}
	m, err := ParseHFConfig(p, name, b)
	return m, p, err
}

// ModelOrHF looks the model up in the catalog, else reads its config.json
// (a local directory, or the Hugging Face cache at cacheDir). source says
// where the facts came from: "catalog" or the config.json path. The error
// for a model found nowhere names both places and --profiles.
func (c *Catalog) ModelOrHF(name, cacheDir string) (m Model, source string, err error) {
	m, err = c.Model(name)
	if err == nil {
		return m, "catalog", nil
	}
	hm, p, herr := LoadHFModel(name, cacheDir)
	if herr == nil {
		return hm, p, nil
	}
	if errors.Is(herr, ErrNoHFConfig) {
		return Model{}, "", fmt.Errorf("%w; %v: download the model (its config.json is enough) or pass --profiles FILE with a models: entry", err, herr)
	}
	return Model{}, "", herr
}

// roundTo rounds x to a multiple of step.
func roundTo(x, step float64) float64 { return math.Round(x/step) * step }
