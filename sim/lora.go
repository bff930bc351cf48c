package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
)

// LoRA serving as vLLM does it (vllm/lora, the V1 scheduler): --max-loras
// GPU slots, each sized for --max-lora-rank on every linear layer, are
// allocated at startup (less KV cache); a step batches requests of at most
// max_loras distinct adapters (a waiting request whose adapter would be one
// too many is skipped, not blocking the queue); an adapter not in a slot is
// loaded before the step that needs it, evicting the least recently used
// slot whose adapter no running request uses, from the CPU cache or, the
// first time, from disk. The LoRA kernels (shrink and expand per linear
// layer) run at the padded max rank.

// LoRAModule is one --lora-modules entry: an adapter served under Name.
type LoRAModule struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// BaseModelName is the JSON form's base_model_name (may be empty).
	BaseModelName string `json:"base_model_name,omitempty"`
	// Rank is the adapter's r (adapter_config.json); the virtual runner
	// sets it from the workload, the server reads it at startup.
	Rank int `json:"-"`
}

// ParseLoRAModule parses one --lora-modules value: name=path, or vLLM's
// JSON form {"name": ..., "path": ..., "base_model_name": ...}.
func ParseLoRAModule(s string) (LoRAModule, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var m LoRAModule
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return LoRAModule{}, fmt.Errorf("invalid JSON LoRA module: %v", err)
		}
		if m.Name == "" || m.Path == "" {
			return LoRAModule{}, fmt.Errorf("JSON LoRA module needs name and path")
		}
		return m, nil
	}
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" || strings.ContainsAny(name, " \t") {
		return LoRAModule{}, fmt.Errorf("invalid LoRA module %q: want name=path or JSON", s)
	}
	return LoRAModule{Name: name, Path: path}, nil
}

// readAdapterRank reads r from the adapter's adapter_config.json, as
// vLLM's PEFTHelper does when it loads the adapter.
func readAdapterRank(path string) (int, error) {
	b, err := os.ReadFile(filepath.Join(path, "adapter_config.json"))
	if err != nil {
		return 0, fmt.Errorf("Loading lora %s failed: No adapter found for %s", path, path)
	}
	var c struct {
		R int `json:"r"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.R <= 0 {
		return 0, fmt.Errorf("Loading lora %s failed: adapter_config.json has no valid r", path)
	}
	return c.R, nil
}

// maxLoRARanks are the values vLLM's LoRAConfig accepts for max_lora_rank.
var maxLoRARanks = []int{1, 8, 16, 32, 64, 128, 256, 320, 512}

// validateLoRA applies LoRAConfig's checks and the adapters' rank check.
func (a EngineArgs) validateLoRA() *StartupError {
	if !a.EnableLoRA {
		return nil
	}
	switch {
	case a.MaxLoras < 1:
		return invalid("max_loras (%d) must be >= 1.", a.MaxLoras)
	case !slices.Contains(maxLoRARanks, a.MaxLoraRank):
		return invalid("max_lora_rank (%d) must be one of (1, 8, 16, 32, 64, 128, 256, 320, 512).", a.MaxLoraRank)
	case a.MaxCPULoras > 0 && a.MaxCPULoras < a.MaxLoras:
		return invalid("max_cpu_loras (%d) must be >= max_loras (%d)", a.MaxCPULoras, a.MaxLoras)
	}
	seen := map[string]bool{}
	for _, l := range a.LoRAModules {
		if seen[l.Name] {
			return invalid("The lora adapter '%s' has already been loaded.", l.Name)
		}
		seen[l.Name] = true
		if l.Rank > a.MaxLoraRank {
			return invalid("LoRA rank %d is greater than max_lora_rank %d.", l.Rank, a.MaxLoraRank)
		}
	}
	return nil
}

// loraBytesPerRank is the size of one rank of LoRA A and B matrices over
// every linear layer (q, k, v, o, gate, up, down) of one GPU.
func loraBytesPerRank(m spaces.Model, a EngineArgs) float64 {
	h := float64(m.Hidden)
	q := float64(m.Heads * m.HeadDim)
	kv := float64(m.KVHeads * m.HeadDim)
	inter := float64(m.Intermediate)
	perLayer := (h + q) + 2*(h+kv) + (q + h) + 2*(h+inter) + (inter + h)
	return perLayer * float64(m.Layers) * a.dtypeBytes(m) / float64(a.TensorParallelSize)
}

// loraSlotsGiB is the GPU memory of the max_loras slots at max_lora_rank.
func loraSlotsGiB(m spaces.Model, a EngineArgs) float64 {
	if !a.EnableLoRA {
		return 0
	}
	return float64(a.MaxLoras*a.MaxLoraRank) * loraBytesPerRank(m, a) / gib
}

// LoRA timing constants.
const (
	loraKernelPerLayerS = 10e-6 // shrink + expand launches per layer and step with adapters in the batch
	loraDiskFixedS      = 0.040 // open and parse an adapter the first time
	loraDiskBytesPerS   = 2e9   // safetensors read
	loraCopyFixedS      = 0.5e-3
	loraCopyBytesPerS   = 20e9 // pinned CPU cache to GPU
)

// loraState is one engine's adapter slots.
type loraState struct {
	slots     int
	maxCPU    int     // CPU cache capacity (max_cpu_loras, default max_loras)
	rankBytes float64 // per rank, per GPU
	maxRank   int
	ranks     []int // by adapter id (1-based; 0 unused)
	resident  []int // adapters in GPU slots, least recently used first
	cpu       []int // adapters in the CPU cache, least recently used first
	active    map[int]int
	pendingS  float64 // load time to add to the next step
}

func newLoRAState(m spaces.Model, a EngineArgs) *loraState {
	l := &loraState{slots: max(1, a.MaxLoras), maxCPU: max(a.MaxCPULoras, a.MaxLoras), rankBytes: loraBytesPerRank(m, a),
		maxRank: a.MaxLoraRank, ranks: []int{0}, active: map[int]int{}}
	for _, mod := range a.LoRAModules {
		r := mod.Rank
		if r <= 0 {
			r = a.MaxLoraRank
		}
		l.ranks = append(l.ranks, r)
	}
	return l
}

// admissible reports whether a request of adapter id may join the batch.
func (l *loraState) admissible(id int) bool {
	return id == 0 || l.active[id] > 0 || len(l.active) < l.slots
}

// start records a request of adapter id joining RUNNING: the adapter is
// made resident, loaded if it was not, and its load time is charged to
// the step.
func (l *loraState) start(id int, st *Stats) {
	if id == 0 {
		return
	}
	l.active[id]++
	if i := slices.Index(l.resident, id); i >= 0 {
		l.resident = append(slices.Delete(l.resident, i, i+1), id)
		return
	}
	if len(l.resident) >= l.slots {
		for i, r := range l.resident {
			if l.active[r] == 0 {
				l.resident = slices.Delete(l.resident, i, i+1)
				break
			}
		}
	}
	l.resident = append(l.resident, id)
	bytes := float64(l.ranks[min(id, len(l.ranks)-1)]) * l.rankBytes
	if i := slices.Index(l.cpu, id); i >= 0 {
		l.cpu = append(slices.Delete(l.cpu, i, i+1), id)
	} else {
		l.pendingS += loraDiskFixedS + bytes/loraDiskBytesPerS
		st.LoRADiskLoads++
		if len(l.cpu) >= l.maxCPU {
			l.cpu = l.cpu[1:]
		}
		l.cpu = append(l.cpu, id)
	}
	l.pendingS += loraCopyFixedS + bytes/loraCopyBytesPerS
	st.LoRALoads++
}

// stop records a request of adapter id leaving RUNNING (finished or
// preempted).
func (l *loraState) stop(id int) {
	if id == 0 {
		return
	}
	if l.active[id]--; l.active[id] <= 0 {
		delete(l.active, id)
	}
}

// stepTime is the LoRA part of a step of n tokens with adapters distinct
// adapters in the batch: the pending loads, the kernels' launches and
// their reads of the padded slots.
func (l *loraState) stepTime(e *Engine, n float64, adapters int) float64 {
	d := l.pendingS
	l.pendingS = 0
	if adapters == 0 {
		return d
	}
	slot := float64(l.maxRank) * l.rankBytes
	flops := 2 * n * float64(l.maxRank) * l.rankBytes / e.args.dtypeBytes(e.model)
	return d + float64(e.model.Layers)*loraKernelPerLayerS + float64(adapters)*slot/e.memBW + flops/e.peakFlops
}
