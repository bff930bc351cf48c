package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/tuner"
)

// alertFlags are global: any command whose failure an operator must hear
// about sends it to the webhook (see alertOf).
func alertFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "alert-webhook", Usage: "POST regressions, failed runs and a broken engine to this URL", EnvVars: []string{"TUNER_ALERT_WEBHOOK"}},
		&cli.StringFlag{Name: "alert-format", Value: string(alert.FormatAlertmanager), Usage: "alert payload: alertmanager (Alertmanager's /api/v2/alerts array) or json"},
		&cli.StringFlag{Name: "alert-log", Usage: "append a JSON line per alert delivery (attempts, status) to this file"},
	}
}

// alertSetup is what the global alert flags asked for, read before the
// command runs.
type alertSetup struct {
	webhook, format, log string
	command              string
}

func readAlertSetup(c *cli.Context, s *alertSetup) error {
	s.webhook, s.format, s.log = c.String("alert-webhook"), c.String("alert-format"), c.String("alert-log")
	// The command's name: its words before the first flag ("bench compare").
	var words []string
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "-") || len(words) == 2 {
			break
		}
		words = append(words, a)
	}
	s.command = strings.Join(words, " ")
	if _, err := alert.ParseFormat(s.format); err != nil {
		return usagef("--alert-format: %v", err)
	}
	return nil
}

// runCommands are the commands whose failure is a failed run.
var runCommands = []string{"search", "worker", "bench run", "bench tier", "bench compare"}

// alertOf is the alert a command's error raises, if any: a gate regression,
// a broken engine, or a failed run (not a usage error or an interrupt).
func alertOf(err error, command string) (alert.Event, bool) {
	ev := alert.Event{Severity: "critical", Summary: err.Error(), Time: time.Now(), Source: "tuner " + command,
		Labels: map[string]string{"command": command}}
	var re regressionError
	switch {
	case errors.As(err, &re):
		ev.Kind = alert.KindRegression
		ev.Labels["model"], ev.Labels["base_run"], ev.Labels["new_run"] = re.rep.Model, re.rep.Base, re.rep.New
		ev.Detail = fmt.Sprintf("%d of %d rows regressed (alpha %g, threshold %g%%)", re.rep.Regressions, len(re.rep.Rows), re.rep.Alpha, 100*re.rep.Threshold)
		return ev, true
	case errors.Is(err, tuner.ErrEngineBroken):
		ev.Kind = alert.KindEngineBroken
		return ev, true
	case errors.As(err, new(usageError)), errors.As(err, new(inconclusiveError)), errors.Is(err, context.Canceled):
		return ev, false
	}
	for _, c := range runCommands {
		if command == c || strings.HasPrefix(command, c+" ") {
			ev.Kind, ev.Severity = alert.KindRunFailed, "warning"
			return ev, true
		}
	}
	return ev, false
}

// sendAlert delivers the alert err raises (with its own deadline: the
// command's context may be cancelled) and says on stderr what happened.
func sendAlert(s alertSetup, err error, stderr io.Writer) {
	if s.webhook == "" || err == nil {
		return
	}
	ev, ok := alertOf(err, s.command)
	if !ok {
		return
	}
	snd, closeLog, serr := newAlertSender(s, stderr)
	if serr != nil {
		fmt.Fprintf(stderr, "tuner: alert: %v\n", serr)
		return
	}
	defer closeLog()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, serr := snd.Send(ctx, ev)
	if serr != nil {
		fmt.Fprintf(stderr, "tuner: alert %s: %v\n", ev.Kind, serr)
		return
	}
	fmt.Fprintf(stderr, "tuner: alert %s sent to %s (%d attempt(s))\n", ev.Kind, s.webhook, d.Attempts)
}

// newAlertSender builds the sender the alert flags describe (its log
// file opened; a log that cannot be opened is said on stderr and skipped);
// closeLog closes the log.
func newAlertSender(s alertSetup, stderr io.Writer) (snd *alert.Sender, closeLog func(), err error) {
	format, _ := alert.ParseFormat(s.format)
	cfg := alert.DefaultConfig()
	cfg.URL, cfg.Format = s.webhook, format
	closeLog = func() {}
	if s.log != "" {
		f, lerr := alert.OpenLog(s.log)
		if lerr != nil {
			fmt.Fprintf(stderr, "tuner: %v\n", lerr)
		} else {
			closeLog = func() { f.Close() }
			cfg.Log = f
		}
	}
	snd, err = alert.NewSender(cfg)
	if err != nil {
		closeLog()
	}
	return snd, closeLog, err
}

// writeGateMetrics writes the gate's verdict series as a Prometheus text
// file (for node_exporter's textfile collector): a CLI gate has no
// /metrics of its own.
func writeGateMetrics(path string, rep *gate.Report) error {
	reg := prometheus.NewRegistry()
	alert.NewGateMetrics(reg).Observe(rep, time.Now())
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("--metrics-file: %w", err)
	}
	return nil
}
