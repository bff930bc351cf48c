package sim

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		name   string
		chat   bool
		body   string
		errHas string
		want   apiRequest
	}{
		{name: "token ids, bench style", body: `{"model":"m","prompt":[1,2,3,4],"max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"repetition_penalty":1.0,"logprobs":null}`,
			want: apiRequest{Model: "m", PromptTokens: 4, TokenIDs: []int{1, 2, 3, 4}, MaxTokens: 8, IgnoreEOS: true, Stream: true, IncludeUsage: true}},
		{name: "text prompt, default max_tokens", body: `{"prompt":"abcdefghij"}`, want: apiRequest{PromptTokens: 3, Text: "abcdefghij", MaxTokens: 16}},
		{name: "single-element batches", body: `{"prompt":[[5,6]],"min_tokens":2,"max_tokens":4}`, want: apiRequest{PromptTokens: 2, TokenIDs: []int{5, 6}, MaxTokens: 4, MinTokens: 2}},
		{name: "priority", body: `{"prompt":"x","priority":-3}`, want: apiRequest{PromptTokens: 1, Text: "x", MaxTokens: 16, Priority: -3}},
		{name: "chat string content", chat: true, body: `{"messages":[{"role":"system","content":"abcd"},{"role":"user","content":"efgh"}],"max_completion_tokens":5}`,
			want: apiRequest{Chat: true, PromptTokens: 2*chatTemplateTokens + 2, Text: "abcdefgh", MaxTokens: 5}},
		{name: "chat parts, no max", chat: true, body: `{"messages":[{"role":"user","content":[{"type":"text","text":"abcd"}]}],"stream":true}`,
			want: apiRequest{Chat: true, PromptTokens: chatTemplateTokens + 1, Text: "abcd", MaxTokens: -1, Stream: true}},
		{name: "bad json", body: `{"prompt":`, errHas: "Invalid JSON"},
		{name: "trailing data", body: `{"prompt":"a"} {}`, errHas: "trailing"},
		{name: "no prompt", body: `{}`, errHas: "prompt"},
		{name: "empty ids", body: `{"prompt":[]}`, errHas: "empty"},
		{name: "batched prompts", body: `{"prompt":["a","b"]}`, errHas: "batched"},
		{name: "negative id", body: `{"prompt":[1,-2]}`, errHas: "out of vocabulary"},
		{name: "zero max_tokens", body: `{"prompt":"a","max_tokens":0}`, errHas: "at least 1"},
		{name: "min above max", body: `{"prompt":"a","max_tokens":2,"min_tokens":3}`, errHas: "min_tokens"},
		{name: "stream options without stream", body: `{"prompt":"a","stream_options":{"include_usage":true}}`, errHas: "stream=True"},
		{name: "n > 1", body: `{"prompt":"a","n":2}`, errHas: "n=2"},
		{name: "chat without messages", chat: true, body: `{"messages":[]}`, errHas: "messages"},
		{name: "chat image part", chat: true, body: `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, errHas: "not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeRequest([]byte(c.body), c.chat)
			if c.errHas != "" {
				var ae *apiError
				if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err %v, want 400 containing %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(c.want)
			if string(gj) != string(wj) {
				t.Errorf("got  %s\nwant %s", gj, wj)
			}
		})
	}
}

func TestErrorBodyShapes(t *testing.T) {
	e := badRequest("too long")
	var nested struct {
		Error struct {
			Message, Type string
			Param         any
			Code          int
		}
	}
	if err := json.Unmarshal(errorBody(e, true), &nested); err != nil || nested.Error.Code != 400 || nested.Error.Type != "BadRequestError" || nested.Error.Message != "too long" || nested.Error.Param != nil {
		t.Errorf("nested: %s (%v)", errorBody(e, true), err)
	}
	var flat map[string]any
	if err := json.Unmarshal(errorBody(e, false), &flat); err != nil || flat["object"] != "error" || flat["code"].(float64) != 400 {
		t.Errorf("flat: %s", errorBody(e, false))
	}
}

func TestPromptKeysShareAPrefix(t *testing.T) {
	ids := func(n, tail int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		for i := n - tail; i < n; i++ {
			out[i] = 100000 + i
		}
		return out
	}
	a := promptKeys(apiRequest{TokenIDs: ids(64, 20), PromptTokens: 64}, 16)
	b := promptKeys(apiRequest{TokenIDs: ids(64, 40), PromptTokens: 64}, 16)
	if len(a) != 4 || a[0] != b[0] || a[1] == b[1] || a[2] == b[2] {
		t.Errorf("keys a %x b %x: want first block shared, later ones not (chained)", a, b)
	}
}

func fuzzDecode(f *testing.F, chat bool, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRequest(body, chat)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("decoder error is not a 400 apiError: %v", err)
			}
			return
		}
		if r.PromptTokens <= 0 {
			t.Fatalf("accepted a request without prompt tokens: %+v", r)
		}
		if r.MaxTokens == 0 || r.MaxTokens < -1 || r.MinTokens < 0 {
			t.Fatalf("bad lengths accepted: %+v", r)
		}
		if r.IncludeUsage && !r.Stream {
			t.Fatal("include_usage without stream")
		}
		_ = promptKeys(r, 16)
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	fuzzDecode(f, false,
		`{"model":"m","prompt":[1,2,3],"max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"hello world","min_tokens":2}`, `{"prompt":[[1,2]]}`, `{"prompt":["x"]}`, `{"prompt":null}`)
}

func FuzzDecodeChat(f *testing.F) {
	fuzzDecode(f, true,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"hello"}],"max_tokens":3}`, `{"messages":[{"role":"user","content":null}]}`)
}
