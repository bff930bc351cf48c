package trial_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// TestSimChatEndpoint runs one workload on the real vllm-sim through
// /v1/chat/completions and through /v1/completions: each request gets the
// same output and chunks on both, its chat prompt the template's 4 tokens
// more (as vllm-sim's usage chunk reports), and the latency medians agree
// within the live-vs-virtual slack.
func TestSimChatEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time simulator runs")
	}
	tg := simTarget(t)
	cfg := simConfig(t, tg, nil)
	// A light load (concurrency 2) so that a request's latencies depend on
	// its own prompt and output, not on which others share its batch.
	w := simWorkload()
	w.Arrival.Concurrency, w.NumRequests, w.Warmup = 2, 24, 2
	w.Output = trial.LengthDist{Kind: "fixed", Value: 24}
	// The two endpoints run at the same time, each on its own engine, so
	// that what the machine does (a busy spell slows a whole run) falls on
	// both alike and the paired comparison below sees the endpoints.
	eps := []trial.Endpoint{trial.EndpointChat, trial.EndpointCompletions}
	var res [2]trial.Result
	var errs [2]error
	var wg sync.WaitGroup
	rs := []*trial.Runner{simRunner(t), simRunner(t)}
	probe := probeMachine(rs...)
	for i, e := range eps {
		r, we := rs[i], w
		we.Endpoint = e
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = r.Run(context.Background(), cfg, we)
		}()
	}
	wg.Wait()
	var ms [2]*trial.Metrics
	var recs [2]map[int]trial.Record
	for i, e := range eps {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !res[i].Usable() {
			t.Fatalf("%s: trial %s: %s", e, res[i].String(), res[i].Error)
		}
		ms[i] = res[i].Metrics()
		raw, err := trial.ReadRaw(res[i].RawPath)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = map[int]trial.Record{}
		for _, l := range raw.Levels {
			for _, rec := range l.Records {
				recs[i][rec.Index] = rec
			}
		}
	}
	lag := probe.Stop()
	t.Logf("machine: %v", lag)
	trial.NoLeftoversForTest(t)
	chat, comp := ms[0], ms[1]
	if chat.Failed != 0 || comp.Failed != 0 {
		t.Fatalf("failed requests: chat %d, completions %d", chat.Failed, comp.Failed)
	}
	// The same request (index) on both endpoints: the same output, and the
	// prompt the chat template's 4 tokens longer (vllm-sim's usage says so).
	same := 0
	var dTTFT []float64 // chat minus completions, same request, ms
	for i, c := range recs[0] {
		p, ok := recs[1][i]
		if !ok {
			continue
		}
		same++
		if c.OK() && p.OK() {
			dTTFT = append(dTTFT, float64(c.TTFT()-p.TTFT())/1e6)
		}
		if c.OutputLen != p.OutputLen || len(c.Chunks) != len(p.Chunks) || c.PromptLen != p.PromptLen+4 {
			t.Errorf("request %d: chat prompt %d, output %d, %d chunks; completions %d, %d, %d",
				i, c.PromptLen, c.OutputLen, len(c.Chunks), p.PromptLen, p.OutputLen, len(p.Chunks))
		}
	}
	if same < w.NumRequests {
		t.Fatalf("%d requests on both endpoints, want at least %d", same, w.NumRequests)
	}
	const slackMs = 5.0 // as TestSimFullTrialMatchesVirtual: loopback, framing, scheduling
	// Each endpoint's latencies also carry what this machine's scheduling
	// added (liveSlackMs, as TestSimFullTrialMatchesVirtual allows over the
	// virtual clock), not always to both runs alike.
	busy := liveSlackMs(lag, liveHops)
	// TTFT is compared request by request (the prompt lengths, 256-768
	// tokens, dominate it): the median difference is about the chat
	// template's 4 tokens (unintended prefix-cache hits are counted
	// directly by TestChatPromptsOnSim).
	slices.Sort(dTTFT)
	d := trial.Percentile(dTTFT, 50)
	t.Logf("ttft paired   median chat - completions %+.2f ms over %d requests", d, len(dTTFT))
	if allowed := max(0.10*comp.TTFT.Median, slackMs) + busy; math.Abs(d) > allowed {
		t.Errorf("ttft: chat - completions %+.2f ms at the median of %d requests (completions median %.2f, allowed %.2f)", d, len(dTTFT), comp.TTFT.Median, allowed)
	}
	for _, c := range []struct {
		name       string
		comp, chat float64
	}{
		{"tpot_median", comp.TPOT.Median, chat.TPOT.Median},
		{"itl_median", comp.ITL.Median, chat.ITL.Median},
	} {
		t.Logf("%-12s completions %8.2f  chat %8.2f", c.name, c.comp, c.chat)
		if allowed := max(0.10*c.comp, slackMs) + busy; math.Abs(c.chat-c.comp) > allowed {
			t.Errorf("%s: chat %.2f vs completions %.2f (allowed %.2f)", c.name, c.chat, c.comp, allowed)
		}
	}
}
