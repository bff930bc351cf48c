package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/service"
)

func init() { register(serveCommand()) }

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "run the optimizer as a service: HTTP API, job queue, web dashboard and /metrics",
		ArgsUsage: " ",
		Description: "Serves the JSON API under /api/v1, Server-Sent Events of job progress, a dashboard at / and\n" +
			"Prometheus metrics at /metrics. Search jobs (the options of `tuner search` as JSON) run one at a time\n" +
			"per GPU set. Ctrl-C stops running jobs like it stops a search; the next start resumes them.\n" +
			"Schedules (/api/v1/schedules, the Schedules tab) queue benchmark tiers and searches on cron expressions;\n" +
			"a scheduled run's regression or failure goes to the global --alert-webhook.\n" +
			"Binds loopback by default; any other address needs --token (or TUNER_TOKEN).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "`ADDR` to listen on"},
			&cli.StringFlag{Name: "gpu-sets", Usage: "GPU sets, one job at a time each, as CUDA_VISIBLE_DEVICES values separated by ';' (e.g. '0,1;2,3'; default: one set, the environment's)"},
			&cli.StringFlag{Name: "token", EnvVars: []string{"TUNER_TOKEN"}, Usage: "bearer `TOKEN` every API call needs (required on a non-loopback --listen)"},
			&cli.BoolFlag{Name: "public-read", Usage: "with --token: read-only endpoints need no token"},
			// --db (global): a bbolt file or a postgres:// URL.
		},
		Action: runServe,
	}
}

// parseGPUSets reads --gpu-sets: ';'-separated lists of device indices.
func parseGPUSets(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []string
	for _, set := range strings.Split(v, ";") {
		set = strings.TrimSpace(set)
		if set == "" {
			return nil, usagef("--gpu-sets %q: empty set", v)
		}
		for _, d := range strings.Split(set, ",") {
			if d == "" || strings.Trim(d, "0123456789") != "" {
				return nil, usagef("--gpu-sets %q: %q is not a device index", v, d)
			}
		}
		out = append(out, set)
	}
	return out, nil
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usagef("--listen %q: %v", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func runServe(c *cli.Context) error {
	addr, token := c.String("listen"), c.String("token")
	loop, err := isLoopback(addr)
	if err != nil {
		return err
	}
	if !loop && token == "" {
		return usagef("--listen %s is not loopback: set --token or TUNER_TOKEN (every API call then needs it)", addr)
	}
	if c.Bool("public-read") && token == "" {
		return usagef("--public-read needs --token (without a token everything is open to loopback anyway)")
	}
	sets, err := parseGPUSets(c.String("gpu-sets"))
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if c.Bool("verbose") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
	db, err := dbArg(c)
	if err != nil {
		return err
	}
	st, err := openSearchDB(c.Context, db, log)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := service.Config{DB: st, DataDir: dataDir(db), Shared: dbopen.IsURL(db), GPUSets: sets, Token: token, PublicRead: c.Bool("public-read"), Logger: log}
	// The global alert flags: a scheduled run's regression or failure is
	// sent while the service runs.
	var alerts alertSetup
	if err := readAlertSetup(c, &alerts); err != nil {
		return err
	}
	if alerts.webhook != "" {
		snd, closeLog, err := newAlertSender(alerts, c.App.ErrWriter)
		if err != nil {
			return usagef("--alert-webhook: %v", err)
		}
		defer closeLog()
		cfg.Alerts = snd
	}
	srv, err := service.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	ctx, stop := context.WithCancel(c.Context)
	defer stop()
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // the event stream lifts it for itself
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx }, // streams end on shutdown
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving", "addr", ln.Addr().String(), "db", st.Path(), "gpu_sets", max(len(sets), 1), "token", token != "")
	fmt.Fprintf(c.App.Writer, "tuner serve: http://%s/ (db %s)\n", ln.Addr(), st.Path())
	jobs := make(chan error, 1)
	go func() { jobs <- srv.Run(ctx) }()
	httpErr := make(chan error, 1)
	go func() { httpErr <- hs.Serve(ln) }()
	select {
	case err = <-httpErr:
	case <-ctx.Done():
	}
	stop() // jobs stop as a search stops on Ctrl-C
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if jerr := <-jobs; jerr != nil && err == nil {
		err = jerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err == nil && c.Context.Err() != nil {
		log.Info("stopped: running jobs resume at the next start")
		return c.Context.Err()
	}
	return err
}
