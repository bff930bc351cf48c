package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/spaces"
)

// ConfigFileFlags reads a vLLM --config YAML file (flag names as keys, as
// `tuner recommend` writes it) into command-line flags in file order:
// `--key value`, `--key` for true, `--no-key` for false (as vLLM does).
func ConfigFileFlags(path string) ([]string, error) {
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var ms yaml.MapSlice
	if err := bounded.DecodeYAML(path, b, &ms); err != nil {
		return nil, spaces.YAMLError(path, b, err)
	}
	var out []string
	for _, it := range ms {
		k, ok := it.Key.(string)
		if !ok || k == "" {
			return nil, &spaces.FileError{File: path, Msg: fmt.Sprintf("key %v: want a flag name", it.Key)}
		}
		flag := "--" + strings.ReplaceAll(strings.TrimPrefix(k, "--"), "_", "-")
		switch v := it.Value.(type) {
		case bool:
			if v {
				out = append(out, flag)
			} else {
				out = append(out, "--no-"+strings.TrimPrefix(flag, "--"))
			}
		case nil:
			return nil, &spaces.FileError{File: path, Field: k, Msg: "no value"}
		case string:
			out = append(out, flag, v)
		case uint64:
			out = append(out, flag, strconv.FormatUint(v, 10))
		case int64:
			out = append(out, flag, strconv.FormatInt(v, 10))
		case float64:
			out = append(out, flag, strconv.FormatFloat(v, 'g', -1, 64))
		default:
			return nil, &spaces.FileError{File: path, Field: k, Msg: fmt.Sprintf("value %v: want a scalar", v)}
		}
	}
	return out, nil
}
