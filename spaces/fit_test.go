package spaces

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckWeights(t *testing.T) {
	tests := []struct {
		model, gpu string
		gpus       int
		wantErr    []string // substrings; nil = fits
	}{
		{"Llama-3.1-8B", "H100", 1, nil},
		{"Llama-3.1-70B", "H100", 1, []string{"Llama-3.1-70B needs 131.4 GiB of weights", "per GPU", "use --gpus 2"}},
		{"Llama-3.1-70B", "H100", 2, nil},
		{"Llama-3.1-70B", "A100-40GB", 2, []string{"use --gpus 4"}},
		{"Llama-3.1-70B", "H200", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.gpu, func(t *testing.T) {
			err := resolved(t, target(t, tt.model, tt.gpu, tt.gpus, "")).CheckWeights()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("fits, got %v", err)
				}
				return
			}
			if !errors.Is(err, ErrDoesNotFit) {
				t.Fatalf("err %v, want ErrDoesNotFit", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err, s)
				}
			}
		})
	}
}

func TestFitRequests(t *testing.T) {
	tg := target(t, "Llama-3.1-8B", "H100", 1, "")
	tests := []struct {
		maxModelLen, longest int
		wantErr              string
	}{
		{8192, 576, ""},
		{576, 576, ""},
		{256, 576, "max_model_len 256 cannot hold the workload's longest request (576 tokens"},
		{0, 200000, "exceeds Llama-3.1-8B's max_position_embeddings 131072"},
		{0, 131072, ""}, // unpinned: the model's maximum
	}
	for _, tt := range tests {
		tg.MaxModelLen = tt.maxModelLen
		err := resolved(t, tg).FitRequests(tt.longest)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("len %d, longest %d: %v", tt.maxModelLen, tt.longest, err)
			}
			continue
		}
		if !errors.Is(err, ErrDoesNotFit) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("len %d, longest %d: err %v, want %q", tt.maxModelLen, tt.longest, err, tt.wantErr)
		}
	}
}
