package chart

// sampleFront is a front as a search leaves it: members on the step line,
// one on the front by VRAM only, the default and the recommendation, some
// others, an SLO bound inside the data.
func sampleFront() FrontData {
	return FrontData{
		Title: "Qwen/Qwen2.5-7B-Instruct on 1x H100-80GB, sim-virtual, workload chat", Throughput: "output_throughput", Latency: "tpot_p99",
		Front: []Config{
			{ID: "aaaaaaaaaaaa", Flags: []string{"--max-num-seqs=64"}, Throughput: 1800, Latency: 11.7, VRAM: 61.2, Runs: 3},
			{ID: "bbbbbbbbbbbb", Flags: []string{"--max-num-seqs=128"}, Throughput: 2600, Latency: 14.2, VRAM: 66.0, Runs: 3},
			{ID: "cccccccccccc", Flags: []string{"--max-num-seqs=256", "--enable-chunked-prefill"}, Throughput: 3100, Latency: 19.5, VRAM: 70.4, Runs: 3},
			{ID: "dddddddddddd", Flags: []string{"--gpu-memory-utilization=0.8"}, Throughput: 2500, Latency: 15.0, VRAM: 52.3, Runs: 1},
			{ID: "eeeeeeeeeeee", Flags: []string{"--max-num-seqs=160"}, Throughput: 2700, Latency: 14.6, VRAM: 66.4, Runs: 1},
		},
		Default:     &Config{ID: "ffffffffffff", Throughput: 2200, Latency: 16.1, VRAM: 70.0, Runs: 3},
		Recommended: &Config{ID: "cccccccccccc", Flags: []string{"--max-num-seqs=256", "--enable-chunked-prefill"}, Throughput: 3100, Latency: 19.5, VRAM: 70.4, Runs: 3},
		Others: []Config{
			{ID: "111111111111", Throughput: 1500, Latency: 18.0, VRAM: 70},
			{ID: "222222222222", Throughput: 2000, Latency: 24.0, VRAM: 70},
		},
		Gain:         "recommended: +40.9% output_throughput over vLLM's default (p = 0.008, 95% CI +35.1% to +46.0%)",
		LatencyLimit: 22,
	}
}
