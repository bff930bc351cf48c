package spaces

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

type strictDoc struct {
	Name  string         `yaml:"name"`
	Count int            `yaml:"count"`
	Sub   map[string]int `yaml:"sub"`
}

func decodeStrict(b []byte) error {
	var d strictDoc
	return yaml.NewDecoder(bytes.NewReader(b), yaml.Strict()).Decode(&d)
}

// YAML errors of files that are not of the expected kind name the file, the
// line and column and a field that is a plain name, never the content.
func TestYAMLErrorQuotesNoContent(t *testing.T) {
	tests := []struct {
		name, body, want string
		secrets          []string
	}{
		{"shadow", "root:$6$Zq3kB9$hashhash:19700:0:99999:7:::\n", "f.yaml:1:1: unknown field", []string{"$6$", "Zq3kB9", "root"}},
		{"passwd", "root:x:0:0:root:/root:/bin/bash\n", "f.yaml:1:1:", []string{"/bin/bash", "root"}},
		{"typo names the field", "name: x\ncont: 3\n", "f.yaml:2:1: cont: unknown field", nil},
		{"bad type", "name: x\ncount: hunter2\n", "f.yaml:2:", []string{"hunter2"}},
		{"syntax", "name: [unclosed\n  password: 'hunter2'\n", "f.yaml:", []string{"hunter2"}},
		{"secret as key", "api_key=sk-live-abcdef: 1\n", "f.yaml:1:1: unknown field", []string{"sk-live", "abcdef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.body)
			err := decodeStrict(b)
			if err == nil {
				t.Fatal("decoded")
			}
			msg := YAMLError("f.yaml", b, err).Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("%q lacks %q", msg, tt.want)
			}
			for _, s := range tt.secrets {
				if strings.Contains(msg, s) {
					t.Errorf("%q quotes the file (%q)", msg, s)
				}
			}
		})
	}
}

// No run of 12 bytes of the input with a character that no parser message
// or field name has ($ / @ # % ! =) appears in the error.
func FuzzYAMLError(f *testing.F) {
	f.Add([]byte("root:$6$Zq3kB9$hashhash:19700:0:99999:7:::\n"))
	f.Add([]byte("name: x\ncount: hunter2@example.com/x\n"))
	f.Add([]byte("sub: {a: 1, b!c: 2}\n"))
	odd := regexp.MustCompile(`[$/@#%!=]`)
	f.Fuzz(func(t *testing.T, b []byte) {
		err := decodeStrict(b)
		if err == nil {
			return
		}
		msg := YAMLError("f.yaml", b, err).Error()
		for i := 0; i+12 <= len(b); i++ {
			w := string(b[i : i+12])
			if odd.MatchString(w) && strings.Contains(msg, w) {
				t.Fatalf("error %q quotes the input %q", msg, w)
			}
		}
	})
}
