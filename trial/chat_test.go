package trial

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chatServer streams like vLLM's chat endpoint: a role chunk with empty
// content, max tokens content chunks gap apart, an empty-content chunk
// with finish_reason, usage and [DONE]. It keeps the last request body.
type chatServer struct {
	gap  time.Duration
	last chan chatReq
}

type chatReq struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
	streamFields
}

func (s *chatServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case s.last <- req:
	default:
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	head := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,`
	fmt.Fprint(w, head+`"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n")
	fl.Flush()
	for range req.MaxCompletionTokens {
		time.Sleep(s.gap)
		fmt.Fprint(w, head+`"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}]}`+"\n\n")
		fl.Flush()
	}
	fmt.Fprint(w, head+`"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`+"\n\n")
	prompt := len(strings.Fields(req.Messages[0].Content)) + 4
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n",
		prompt, prompt+req.MaxCompletionTokens, req.MaxCompletionTokens)
}

// TestClientChat: --endpoint chat posts vLLM bench's chat body to
// /v1/chat/completions and counts the chunks whose delta carries text (the
// role chunk and the empty finish chunk are not tokens).
func TestClientChat(t *testing.T) {
	srv := &chatServer{gap: time.Millisecond, last: make(chan chatReq, 1)}
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", srv)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	c := NewClient(hs.URL, "my-chat-model", 10*time.Second, WithEndpoint(EndpointChat))
	defer c.Close()
	rec := c.Do(context.Background(), RequestSpec{Index: 3, PromptLen: 40, OutputLen: 6, PrefixLen: 10}, time.Now())
	if !rec.OK() {
		t.Fatalf("Err = %q", rec.Err)
	}
	if len(rec.Chunks) != 6 || rec.OutputLen != 6 || rec.PromptLen != 44 {
		t.Errorf("chunks %d, output %d, prompt %d; want 6, 6, 44", len(rec.Chunks), rec.OutputLen, rec.PromptLen)
	}
	req := <-srv.last
	words := strings.Fields(req.Messages[0].Content)
	if req.Model != "my-chat-model" || len(req.Messages) != 1 || req.Messages[0].Role != "user" || len(words) != 40 ||
		req.MaxCompletionTokens != 6 || req.MaxTokens != 6 || !req.IgnoreEOS || !req.Stream || !req.StreamOptions.IncludeUsage {
		t.Errorf("request = %+v", req)
	}
	// The prefix is shared with the next request, the rest differs.
	c.Do(context.Background(), RequestSpec{Index: 4, PromptLen: 40, OutputLen: 1, PrefixLen: 10}, time.Now())
	w2 := strings.Fields((<-srv.last).Messages[0].Content)
	if strings.Join(words[:10], " ") != strings.Join(w2[:10], " ") || strings.Join(words[10:], " ") == strings.Join(w2[10:], " ") {
		t.Errorf("prefix not shared exactly:\n%q\n%q", words, w2)
	}
	// The completions client does not find the chat route.
	c2 := NewClient(hs.URL, "m", 10*time.Second)
	defer c2.Close()
	if rec := c2.Do(context.Background(), RequestSpec{PromptLen: 4, OutputLen: 1}, time.Now()); !strings.HasPrefix(rec.Err, "http 404") {
		t.Errorf("completions on a chat-only server: %q, want http 404", rec.Err)
	}
}

// TestChatPromptsDistinct: past the shared prefix no two requests (of one
// level or of two levels) share their first block of words, so the prefix
// cache only ever hits the declared prefix.
func TestChatPromptsDistinct(t *testing.T) {
	const prefix, block = 32, 16
	seen := map[string]int{}
	for salt := range 3 {
		for idx := range 2000 {
			var b strings.Builder
			for j := range prefix + block {
				b.WriteString(promptWord(idx, prefix, j, salt))
			}
			s := b.String()
			if idx > 0 || salt > 0 {
				if first := promptWordsAt(0, prefix, 0); s[:len(first)] != first {
					t.Fatalf("request %d/%d: prefix differs", salt, idx)
				}
			}
			k := s[len(promptWordsAt(idx, prefix, salt)):]
			if o, ok := seen[k]; ok {
				t.Fatalf("request %d (salt %d) repeats the first block after the prefix of request %d", idx, salt, o)
			}
			seen[k] = idx
		}
	}
}

// promptWordsAt is the shared prefix of request idx's chat prompt.
func promptWordsAt(idx, prefix, salt int) string {
	var b strings.Builder
	for j := range prefix {
		b.WriteString(promptWord(idx, prefix, j, salt))
	}
	return b.String()
}

func TestPromptWords(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range promptWords {
		// " " + three letters: one BPE token, and one by vllm-sim's
		// four-bytes-per-token rule.
		if len(w) != 4 || w[0] != ' ' || seen[w] {
			t.Errorf("prompt word %q: want a space, three letters, no repeat", w)
		}
		seen[w] = true
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]Endpoint{"": EndpointCompletions, "completions": EndpointCompletions, "chat": EndpointChat} {
		if got, err := ParseEndpoint(in); err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseEndpoint("responses"); err == nil {
		t.Error("ParseEndpoint(responses): no error")
	}
}

func TestParseChatChunk(t *testing.T) {
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,`
	tests := []struct {
		name, in string
		want     chunk
		err      bool
	}{
		{"role", head + `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`, chunk{}, false},
		{"token", head + `"delta":{"content":" Hi"},"logprobs":null,"finish_reason":null}]}`, chunk{Content: true}, false},
		{"reasoning", head + `"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}`, chunk{Content: true}, false},
		{"finish", head + `"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`, chunk{}, false},
		{"null content", head + `"delta":{"content":null}}]}`, chunk{}, false},
		{"no delta", head + `"text":"x"}]}`, chunk{}, false},
		{"escaped", head + `"delta":{"content":"\n"}}]}`, chunk{Content: true}, false},
		{"usage", `{"id":"x","choices":[],"usage":{"prompt_tokens":44,"total_tokens":50,"completion_tokens":6}}`, chunk{Usage: true, PromptTokens: 44, CompletionTokens: 6}, false},
		{"done", "[DONE]", chunk{Done: true}, false},
		{"error", `{"error":{"message":"boom","code":500}}`, chunk{Error: true, Message: "boom"}, false},
		{"truncated", head + `"delta":{"content":"a"`, chunk{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseChatChunk([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestChatPromptsOnSim: vllm-sim (prefix caching on, as vLLM's default)
// finds exactly the declared prefix of the chat prompts in its cache and
// nothing more: with requests one at a time, prefix_len 32 (two blocks)
// hits 32 tokens per request after the first, prefix_len 0 hits none, on
// one level and across two (salts).
func TestChatPromptsOnSim(t *testing.T) {
	if testing.Short() {
		t.Skip("real simulator process")
	}
	e, err := StartEngine(context.Background(), EngineConfig{
		Command: []string{simBin(t), "serve", "Llama-3.1-8B", "--gpu", "H100-80GB"}, Flags: []string{"--startup-scale", "0.01"},
		LogPath: t.TempDir() + "/engine.log", StopGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if err := e.WaitHealthy(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c := NewClient(e.BaseURL(), "Llama-3.1-8B", 30*time.Second, WithEndpoint(EndpointChat))
	defer c.Close()
	run := func(n, prefix, salt int) {
		specs := specsN(n, 96, 2)
		for i := range specs {
			specs[i].PrefixLen = prefix
		}
		for i, r := range c.Drive(context.Background(), specs, Load{Concurrency: 1, Salt: salt}, nil) {
			if !r.OK() {
				t.Fatalf("request %d: %s", i, r.Err)
			}
		}
	}
	run(30, 0, 0)
	run(30, 0, 1)
	if h := prefixHits(t, e.BaseURL()); h != 0 {
		t.Fatalf("%v prefix-cache hits over 60 chat prompts without a shared prefix, want 0", h)
	}
	run(10, 32, 2)
	if h := prefixHits(t, e.BaseURL()); h != 32*9 {
		t.Errorf("%v prefix-cache hits over 10 chat prompts with a 32-token prefix, want %d", h, 32*9)
	}
}

// prefixHits reads vllm:prefix_cache_hits_total from the engine's /metrics.
func prefixHits(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "vllm:prefix_cache_hits_total") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", l, err)
			}
			return v
		}
	}
	t.Fatalf("no vllm:prefix_cache_hits_total in /metrics")
	return 0
}
