package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/trial"
)

// EngineLauncher starts the engine through trial's engine path (its own
// process group, health wait, group kill on Stop) with cfg's command and
// flags; each launch logs to a fresh file in cfg's log directory.
func EngineLauncher(cfg trial.EngineConfig, startup time.Duration, logDir string) Launcher {
	n := 0
	return func(ctx context.Context) (Server, ServerInfo, error) {
		n++
		c := cfg
		c.LogPath = filepath.Join(logDir, fmt.Sprintf("bench-%s-%d.log", time.Now().UTC().Format("20060102T150405"), n))
		eng, err := trial.StartEngine(ctx, c)
		if err != nil {
			return nil, ServerInfo{}, err
		}
		if err := eng.WaitHealthy(ctx, startup); err != nil {
			return nil, ServerInfo{}, errors.Join(err, eng.Stop())
		}
		info := ServerInfo{EngineVersion: eng.Version(ctx), Flags: append(append([]string(nil), c.Command...), trial.RedactArgs(c.Flags)...)}
		if m, err := eng.ServedModel(ctx); err == nil {
			info.Model = m
		}
		return engineServer{eng}, info, nil
	}
}

type engineServer struct{ *trial.Engine }

var _ Server = engineServer{}

func (s engineServer) Alive(ctx context.Context) bool { return s.Healthy(ctx) }

// URLLauncher connects to a running OpenAI-compatible server: it starts
// nothing. The model is model, else data[0].id of /v1/models (which must
// list model when given); the version is /version's when it answers.
func URLLauncher(base, model string, logger *slog.Logger) (Launcher, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://HOST:PORT", base)
	}
	base = strings.TrimRight(base, "/")
	return func(ctx context.Context) (Server, ServerInfo, error) {
		s := &urlServer{base: base, hc: &http.Client{Timeout: 10 * time.Second}}
		ids, err := trial.ServedModels(ctx, s.hc, base)
		if err != nil {
			return nil, ServerInfo{}, fmt.Errorf("%s unreachable: %w", base, err)
		}
		info := ServerInfo{Model: model}
		switch {
		case model == "" && len(ids) == 0:
			return nil, ServerInfo{}, fmt.Errorf("%s/v1/models lists no model (pass --model)", base)
		case model == "":
			info.Model = ids[0]
		case len(ids) > 0 && !slices.Contains(ids, model):
			return nil, ServerInfo{}, fmt.Errorf("%s does not serve model %q (it serves %s)", base, model, strings.Join(ids, ", "))
		}
		if info.EngineVersion, err = trial.ServerVersion(ctx, s.hc, base); err != nil && logger != nil {
			logger.Debug("no /version", "error", err)
		}
		return s, info, nil
	}, nil
}

type urlServer struct {
	base string
	hc   *http.Client
}

var _ Server = (*urlServer)(nil)

func (s *urlServer) BaseURL() string         { return s.base }
func (s *urlServer) Exited() <-chan struct{} { return nil }
func (s *urlServer) Stop() error             { s.hc.CloseIdleConnections(); return nil }

func (s *urlServer) Alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := trial.ServedModels(ctx, s.hc, s.base)
	return err == nil
}
