// Package spaces owns the search space of engine flags: parameters (int,
// float, bool, categorical; range, step, log scale, vLLM default and the vLLM
// versions that know the flag), constraints between parameters and against
// model and GPU facts, the catalog of those facts (GPU and model profiles),
// and Config, the canonical hashable candidate, with its rendering to vLLM CLI
// flags and to a vLLM --config YAML file.
//
// The default vLLM space is embedded (vllm_space.yaml); a user file overrides
// it (ranges, fixed values, dropped params). Spaces are generic until
// Resolve binds them to a Target, which evaluates the GPU-dependent defaults.
package spaces
