// Package openaitest is an OpenAI-compatible server for tests that streams
// as OpenAI's API does, not as vLLM does: a completions stream ends with a
// chunk of empty text carrying only finish_reason, a chat stream starts
// with a role-only chunk and ends with an empty delta carrying
// finish_reason; the usage chunk ("choices": []) comes only when
// stream_options.include_usage asks for it; then [DONE]. It ignores every
// sampling knob but max_tokens (or max_completion_tokens). Tests serve it
// on loopback (httptest); nothing else imports it.
package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type request struct {
	Model               string                     `json:"model"`
	Prompt              json.RawMessage            `json:"prompt"`
	Messages            []struct{ Content string } `json:"messages"`
	MaxTokens           int                        `json:"max_tokens"`
	MaxCompletionTokens int                        `json:"max_completion_tokens"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// Options shape the server.
type Options struct {
	Model string        // served model (default gpt-test)
	Gap   time.Duration // between tokens (default 1 ms)
	Fail  bool          // answer every completion request 500
}

// Handler serves /health, /v1/models, /v1/completions and
// /v1/chat/completions.
func Handler(o Options) http.Handler {
	if o.Model == "" {
		o.Model = "gpt-test"
	}
	if o.Gap <= 0 {
		o.Gap = time.Millisecond
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"test"}]}`, o.Model)
	})
	stream := func(chat bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req request
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, `{"error":{"message":"bad request body","type":"invalid_request_error","code":400}}`, http.StatusBadRequest)
				return
			}
			if o.Fail {
				http.Error(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":500}}`, http.StatusInternalServerError)
				return
			}
			n := req.MaxTokens
			if chat && req.MaxCompletionTokens > 0 {
				n = req.MaxCompletionTokens
			}
			n = max(n, 1)
			prompt := promptTokens(req, chat)
			object, id := "text_completion", "cmpl-test"
			if chat {
				object, id = "chat.completion.chunk", "chatcmpl-test"
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			send := func(choices string, usage string) {
				fmt.Fprintf(w, `data: {"id":%q,"object":%q,"created":1730000000,"model":%q,"choices":[%s]%s}`+"\n\n", id, object, req.Model, choices, usage)
				fl.Flush()
			}
			if chat {
				send(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`, `,"usage":null`)
			}
			for i := range n {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(o.Gap):
				}
				tok := fmt.Sprintf(" w%d", i)
				if chat {
					send(fmt.Sprintf(`{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":null}`, tok), `,"usage":null`)
				} else {
					send(fmt.Sprintf(`{"text":%q,"index":0,"logprobs":null,"finish_reason":null}`, tok), `,"usage":null`)
				}
			}
			if chat {
				send(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}`, `,"usage":null`)
			} else {
				send(`{"text":"","index":0,"logprobs":null,"finish_reason":"length"}`, `,"usage":null`)
			}
			if req.StreamOptions.IncludeUsage {
				send("", fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, n, prompt+n))
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}
	mux.HandleFunc("/v1/completions", stream(false))
	mux.HandleFunc("/v1/chat/completions", stream(true))
	return mux
}

// promptTokens counts a completions prompt's token ids (or its words, for
// a text prompt) and a chat prompt's words plus the template's few tokens.
func promptTokens(req request, chat bool) int {
	if chat {
		n := 4
		for _, m := range req.Messages {
			n += len(strings.Fields(m.Content))
		}
		return n
	}
	var ids []int
	if json.Unmarshal(req.Prompt, &ids) == nil {
		return len(ids)
	}
	var s string
	json.Unmarshal(req.Prompt, &s)
	return len(strings.Fields(s))
}
