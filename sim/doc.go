// Package sim is the simulated vLLM: GPU and model performance profiles, a
// discrete-event V1-like scheduler on a virtual or real clock, the HTTP server
// behind cmd/vllm-sim, and a trial runner on the virtual clock.
package sim
