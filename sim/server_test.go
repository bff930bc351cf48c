package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-tuner/tuner/internal/proctest"
)

// startServer runs Serve in-process on a free loopback port and returns its
// base URL, its log and a stop function that returns Serve's error.
func startServer(t *testing.T, args ...string) (string, *proctest.Buffer, func() error) {
	t.Helper()
	url, log, stop, _ := startServerExit(t, args...)
	return url, log, stop
}

// startServerExit is startServer plus exited, which waits for Serve to
// return by itself (as it does when its engine dies), with a hang guard of
// a minute, and returns what it returned: a test of a dying server waits
// for the death instead of a fixed sleep (1.2 s for an exit due 1 s after
// the fault was too short on a busy machine).
func startServerExit(t *testing.T, args ...string) (string, *proctest.Buffer, func() error, func() error) {
	t.Helper()
	o, err := ParseServeArgs(append(args, "--host", "127.0.0.1", "--port", "0", "--startup-scale", "0.001", "--disable-log-stats"))
	if err != nil {
		t.Fatal(err)
	}
	log := &proctest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, o, log, OnReady(func(a string) { ready <- a }), DrainTimeout(2*time.Second))
	}()
	var once sync.Once
	var serr error
	stop := func() error {
		once.Do(func() { cancel(); serr = <-done })
		return serr
	}
	exited := func() error {
		once.Do(func() {
			select {
			case serr = <-done:
			case <-time.After(time.Minute):
				t.Errorf("Serve did not return by itself within a minute")
				cancel()
				serr = <-done
			}
		})
		return serr
	}
	t.Cleanup(func() { stop() })
	select {
	case a := <-ready:
		return "http://" + a, log, stop, exited
	case err := <-done:
		t.Fatalf("server exited before ready: %v\n%s", err, log)
	case <-time.After(10 * time.Second):
		t.Fatalf("server not ready\n%s", log)
	}
	return "", nil, nil, nil
}

type sseEvent struct {
	at   time.Time
	data string
}

func postSSE(t *testing.T, url, body string) (int, []sseEvent) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, []sseEvent{{data: string(b)}}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("content type %q", ct)
	}
	var evs []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			blank = true
			continue
		}
		if !blank || !strings.HasPrefix(line, "data: ") {
			t.Errorf("SSE framing: line %q", line)
		}
		blank = false
		evs = append(evs, sseEvent{at: time.Now(), data: strings.TrimPrefix(line, "data: ")})
	}
	return 200, evs
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Delta        *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	} `json:"usage"`
}

func parseChunks(t *testing.T, evs []sseEvent) []chunk {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", evs)
	}
	var out []chunk
	for _, e := range evs[:len(evs)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		out = append(out, c)
	}
	return out
}

func TestServerCompletionStream(t *testing.T) {
	url, _, stop := startServer(t, "Llama-3.1-8B", "--gpu", "H100-80GB", "--max-model-len", "4096")
	code, evs := postSSE(t, url+"/v1/completions",
		`{"model":"Llama-3.1-8B","prompt":`+idsJSON(1000)+`,"max_tokens":20,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 {
		t.Fatalf("status %d: %v", code, evs)
	}
	cs := parseChunks(t, evs)
	if len(cs) != 21 {
		t.Fatalf("%d chunks, want 20 token chunks + usage", len(cs))
	}
	for i, c := range cs[:20] {
		if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || len(c.Choices) != 1 || c.Choices[0].Text == "" {
			t.Errorf("chunk %d: %+v", i, c)
		}
		fr := c.Choices[0].FinishReason
		if (i < 19) != (fr == nil) || (i == 19 && *fr != "length") {
			t.Errorf("chunk %d finish_reason %v", i, fr)
		}
	}
	u := cs[20]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.Prompt != 1000 || u.Usage.Completion != 20 || u.Usage.Total != 1020 {
		t.Errorf("usage chunk %+v", u)
	}
	// Timing: 8B on H100 decodes at ~6.5 ms/token (noise and scheduling
	// jitter of the test machine allowed for).
	itl := evs[19].at.Sub(evs[1].at) / 18
	if itl < 4*time.Millisecond || itl > 40*time.Millisecond {
		t.Errorf("mean inter-token gap %v, want ~6.5 ms", itl)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve after SIGTERM: %v", err)
	}
}

func idsJSON(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("7")
	}
	b.WriteByte(']')
	return b.String()
}

func TestServerChatAndErrors(t *testing.T) {
	url, _, _ := startServer(t, "tiny", "--gpu", "A100-80GB", "--served-model-name", "tiny-chat")
	_, evs := postSSE(t, url+"/v1/chat/completions", `{"model":"tiny-chat","messages":[{"role":"user","content":"hello"}],"max_completion_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
	cs := parseChunks(t, evs)
	if len(cs) != 5 || cs[0].Choices[0].Delta == nil || cs[0].Choices[0].Delta.Role != "assistant" || cs[0].Object != "chat.completion.chunk" ||
		cs[3].Choices[0].FinishReason == nil || cs[4].Usage == nil || cs[4].Usage.Completion != 3 {
		t.Errorf("chat stream: %+v", cs)
	}
	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	code, m := post("/v1/completions", `{"prompt":[1,2,3],"max_tokens":4,"ignore_eos":true}`)
	if code != 200 || m["usage"].(map[string]any)["completion_tokens"].(float64) != 4 || m["object"] != "text_completion" {
		t.Errorf("non-stream completion: %d %v", code, m)
	}
	code, m = post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	if code != 200 || m["object"] != "chat.completion" {
		t.Errorf("non-stream chat: %d %v", code, m)
	}
	errMsg := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		s, _ := e["message"].(string)
		return s
	}
	for _, c := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/v1/completions", `{"prompt":` + idsJSON(3000) + `}`, 400, "This model's maximum context length is 2048 tokens. However, your request has 3000 input tokens."},
		{"/v1/completions", `{"prompt":` + idsJSON(2000) + `,"max_tokens":100}`, 400, "'max_tokens' or 'max_completion_tokens' is too large: 100. This model's maximum context length is 2048 tokens and your request has 2000 input tokens (100 > 2048 - 2000)."},
		{"/v1/completions", `{"model":"other","prompt":"x"}`, 404, "The model `other` does not exist."},
		{"/v1/completions", `{"prompt":"x","priority":1}`, 400, "Priority scheduling is not enabled"},
		{"/v1/completions", `{"prompt":`, 400, "Invalid JSON"},
	} {
		code, m := post(c.path, c.body)
		if code != c.code || !strings.Contains(errMsg(m), c.msg) || m["error"].(map[string]any)["code"].(float64) != float64(c.code) {
			t.Errorf("%s %.40s: %d %v, want %d %q", c.path, c.body, code, m, c.code, c.msg)
		}
	}
	// /v1/models, /version, /health.
	resp, _ := http.Get(url + "/v1/models")
	var models struct {
		Data []struct {
			ID, Root    string
			MaxModelLen int `json:"max_model_len"`
		}
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != "tiny-chat" || models.Data[0].Root != "tiny" || models.Data[0].MaxModelLen != 2048 {
		t.Errorf("models: %+v", models)
	}
	resp, _ = http.Get(url + "/version")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"version":"0.11.0"`) {
		t.Errorf("version: %s", b)
	}
}

func TestServerMetrics(t *testing.T) {
	url, _, _ := startServer(t, "tiny", "--gpu", "H100-80GB", "--gpu-memory-utilization", "0.8")
	for i := 0; i < 3; i++ {
		postSSE(t, url+"/v1/completions", `{"prompt":[1,2,3,4,5],"max_tokens":6,"ignore_eos":true,"stream":true}`)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation) // vLLM's names are legacy-valid (colons allowed)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
		"vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
		"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
		"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:cache_config_info", "vllm:request_success_total",
		"vllm_sim:gpu_memory_used_bytes", "vllm_sim:gpu_memory_total_bytes"} {
		if fams[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	if g := fams["vllm:generation_tokens_total"]; g != nil && g.Metric[0].GetCounter().GetValue() != 18 {
		t.Errorf("generation tokens %v, want 18", g.Metric[0].GetCounter().GetValue())
	}
	if h := fams["vllm:time_to_first_token_seconds"]; h != nil {
		hist := h.Metric[0].GetHistogram()
		if hist.GetSampleCount() != 3 || len(hist.Bucket) != len(ttftBuckets)+1 || hist.Bucket[4].GetUpperBound() != 0.04 {
			t.Errorf("ttft histogram: count %d, %d buckets (+Inf included)", hist.GetSampleCount(), len(hist.Bucket))
		}
	}
	if q := fams["vllm:request_queue_time_seconds"]; q != nil && q.Metric[0].GetHistogram().GetSampleCount() != 3 {
		t.Errorf("queue time observed %d times, want 3", q.Metric[0].GetHistogram().GetSampleCount())
	}
	used := fams["vllm_sim:gpu_memory_used_bytes"].Metric[0].GetGauge().GetValue()
	total := fams["vllm_sim:gpu_memory_total_bytes"].Metric[0].GetGauge().GetValue()
	if r := used / total; r < 0.8 || r > 0.83 {
		t.Errorf("GPU memory used/total = %.3f, want ~0.8 (util)", r)
	}
}

func TestServerFaults(t *testing.T) {
	t.Run("http500", func(t *testing.T) {
		url, _, _ := startServer(t, "tiny", "--fault-http500", "1")
		code, _ := postSSE(t, url+"/v1/completions", `{"prompt":"x","stream":true}`)
		if code != 500 {
			t.Errorf("status %d, want 500", code)
		}
	})
	t.Run("malformed sse", func(t *testing.T) {
		url, _, _ := startServer(t, "tiny", "--fault-malformed-sse", "1")
		_, evs := postSSE(t, url+"/v1/completions", `{"prompt":"x","max_tokens":4,"ignore_eos":true,"stream":true}`)
		bad := 0
		for _, e := range evs {
			if e.data != "[DONE]" && !json.Valid([]byte(e.data)) {
				bad++
			}
		}
		if bad != 1 {
			t.Errorf("%d malformed chunks, want 1", bad)
		}
	})
	t.Run("crash after", func(t *testing.T) {
		url, log, _, exited := startServerExit(t, "tiny", "--fault-crash-after", "2")
		for i := 0; i < 2; i++ {
			postSSE(t, url+"/v1/completions", `{"prompt":"x","max_tokens":2,"stream":true}`)
		}
		if err := exited(); !errors.Is(err, ErrCrashed) || !strings.Contains(log.String(), "died unexpectedly") {
			t.Errorf("Serve returned %v, want ErrCrashed", err)
		}
	})
	t.Run("runtime oom", func(t *testing.T) {
		url, log, _, exited := startServerExit(t, "tiny", "--fault-runtime-oom-after", "1")
		_, evs := postSSE(t, url+"/v1/completions", `{"prompt":"x","max_tokens":2000,"ignore_eos":true,"stream":true}`)
		if len(evs) < 2 || !strings.Contains(evs[len(evs)-2].data, `"error"`) {
			t.Errorf("in-flight request should end with an error event: %v", evs[max(0, len(evs)-2):])
		}
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Errorf("/health %d after engine death, want 503", resp.StatusCode)
			}
		}
		if err := exited(); !errors.Is(err, ErrEngineDead) || !strings.Contains(log.String(), "CUDA out of memory") {
			t.Errorf("Serve returned %v, want ErrEngineDead", err)
		}
	})
	t.Run("startup failure", func(t *testing.T) {
		o, _ := ParseServeArgs([]string{"Llama-3.1-70B", "--gpu", "H100-80GB", "--startup-scale", "0"})
		log := &proctest.Buffer{}
		err := Serve(context.Background(), o, log)
		var se *StartupError
		if !errors.As(err, &se) || !errors.Is(err, ErrOOM) {
			t.Fatalf("err %v, want OOM StartupError", err)
		}
		out := log.String()
		if !strings.Contains(out, "CUDA out of memory") || !strings.Contains(out, "RuntimeError: Engine core initialization failed. See root cause above.") {
			t.Errorf("log:\n%s", out)
		}
	})
	t.Run("hang before healthy", func(t *testing.T) {
		o, _ := ParseServeArgs([]string{"tiny", "--startup-scale", "0", "--fault-hang-before-healthy", "--host", "127.0.0.1", "--port", "0"})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		ready := false
		if err := Serve(ctx, o, io.Discard, OnReady(func(string) { ready = true })); err != nil || ready {
			t.Errorf("hang: err %v ready %v", err, ready)
		}
	})
}

// Many concurrent streams, some cancelled by the client mid-stream: every
// completed stream is well-formed and the engine ends with no running
// request and no KV block in use.
func TestServerConcurrentAndAborts(t *testing.T) {
	url, _, _ := startServer(t, "tiny", "--gpu", "H100-80GB", "-dp", "2", "--max-num-seqs", "8", "--max-num-batched-tokens", "2048", "--time-scale", "2")
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := `{"prompt":` + idsJSON(100+i*10) + `,"max_tokens":30,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			n := 0
			for sc.Scan() {
				if sc.Text() == "" {
					continue
				}
				n++
				if i%5 == 0 && n == 3 {
					cancel() // client disconnect
					return
				}
			}
			if n != 32 {
				errs <- fmt.Errorf("request %d: %d events, want 32", i, n)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Let the engines notice the aborts, then read the gauges.
	deadline := time.Now().Add(3 * time.Second)
	for {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		busy := 0.0
		for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
			for _, m := range fams[name].Metric {
				busy += m.GetGauge().GetValue()
			}
		}
		if len(fams["vllm:num_requests_running"].Metric) != 2 {
			t.Fatalf("want one running gauge per DP engine")
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("engines still busy after all clients left (sum of gauges %v)", busy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveForStop runs Serve with a drain timeout and returns its address, a
// cancel (SIGTERM) and the channel of Serve's result.
func serveForStop(t *testing.T, drain time.Duration, args ...string) (string, context.CancelFunc, chan error) {
	t.Helper()
	o, err := ParseServeArgs(append(args, "--host", "127.0.0.1", "--port", "0", "--startup-scale", "0", "--disable-log-stats"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, o, io.Discard, OnReady(func(a string) { ready <- a }), DrainTimeout(drain)) }()
	select {
	case a := <-ready:
		return a, cancel, done
	case err := <-done:
		t.Fatalf("exited before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	return "", nil, nil
}

// SIGTERM with nothing in flight stops the server at once, even with a
// drain timeout of an hour and a connection opened but unused (which
// http.Server.Shutdown keeps waiting on for 5 s); with a request in flight
// the drain is bounded by the timeout, and a request that ends within it
// completes.
func TestServeStopDrain(t *testing.T) {
	// The bound is a liveness limit well under the 5 s that Shutdown's
	// handling of unused connections took, not a speed measurement.
	const returnsWithin = 3 * time.Second
	returns := func(t *testing.T, done <-chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(returnsWithin):
			t.Fatal(what)
		}
	}
	// stream starts a streamed completion of n tokens and reads its first
	// line.
	stream := func(t *testing.T, addr string, n int) *bufio.Reader {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"prompt":"x","max_tokens":%d,"ignore_eos":true,"stream":true}`, n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil { // the stream has started
			t.Fatal(err)
		}
		return r
	}
	t.Run("idle connection, nothing in flight", func(t *testing.T) {
		addr, cancel, done := serveForStop(t, time.Hour, "tiny")
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cancel()
		returns(t, done, "Serve still draining with no request in flight")
	})
	t.Run("in flight, bounded drain", func(t *testing.T) {
		addr, cancel, done := serveForStop(t, 50*time.Millisecond, "tiny", "--time-scale", "20")
		r := stream(t, addr, 1500)
		cancel()
		returns(t, done, "Serve did not bound the drain of a long request")
		rest, _ := io.ReadAll(r)
		if strings.Contains(string(rest), "[DONE]") {
			t.Error("a 1500-token stream at time scale 20 completed within a 50 ms drain")
		}
	})
	t.Run("in flight, completes within the drain", func(t *testing.T) {
		addr, cancel, done := serveForStop(t, time.Hour, "tiny")
		r := stream(t, addr, 200)
		cancel()
		rest, _ := io.ReadAll(r)
		if !strings.Contains(string(rest), "[DONE]") {
			t.Error("an in-flight request was cut although the drain allowed it to finish")
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
