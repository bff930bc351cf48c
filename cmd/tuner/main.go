// Command tuner finds the best vLLM serving configuration for a model on a
// GPU. It is a thin layer: flags become a Config, one package function runs,
// errors become exit codes here and only here.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/tuner"
)

// version is set by the linker (-X main.version=...).
var version = "0.1.0-dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitInconclusive: bench compare found no regression but could not
	// have found one of the threshold's size.
	exitInconclusive = 3
	exitInterrupted  = 130
)

// commands is filled by the init functions of this package's files, one file
// per command group, so that groups can be added without touching main.
var commands []*cli.Command

func register(c ...*cli.Command) {
	for _, cmd := range c {
		checkArgs(cmd)
	}
	commands = append(commands, c...)
}

// usageError marks errors caused by bad flags, arguments or input files
// (exit code 2): the core's, so that a search spec's errors are the CLI's.
type usageError = tuner.UsageError

// usagef returns a usage error (exit code 2).
var usagef = tuner.Usagef

// asUsage wraps err as a usage error (exit code 2), keeping nil as nil.
var asUsage = tuner.AsUsage

func newApp(stdout, stderr io.Writer) *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	return &cli.App{
		Name:                 "tuner",
		Usage:                "find the best vLLM serving configuration for a model on a GPU",
		Version:              version,
		Writer:               stdout,
		ErrWriter:            stderr,
		Commands:             commands,
		EnableBashCompletion: true,
		Suggest:              true, // "did you mean" for a mistyped command or flag
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "db", Usage: "bbolt database file, or a postgres:// URL (search, db migrate/check/copy)", EnvVars: []string{"TUNER_DB"}},
			&cli.BoolFlag{Name: "verbose", Usage: "debug logging on stderr"},
		}, alertFlags()...),
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return usageError{Err: err}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // exit codes are mapped in run
	}
}

// run executes the app and maps the error to an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	var alerts alertSetup
	app.Before = func(c *cli.Context) error { return readAlertSetup(c, &alerts) }
	err := app.RunContext(ctx, normalizeArgs(app, args))
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "tuner: %v\n", err)
	sendAlert(alerts, err, stderr)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, new(inconclusiveError)):
		return exitInconclusive
	case isFlagError(err):
		return exitUsage
	}
	return exitFailure
}

// isFlagError recognises urfave/cli's own argument errors, which it returns
// as plain errors.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined", "Required flag", "Required flags", "invalid value", "No help topic", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// stopSignals end a command cleanly: the running trial is stopped and
// marked interrupted, and the exit code is 130 whichever one came. SIGHUP is
// among them because a search started over ssh without nohup gets it when
// the session drops; 130 (not the shell's 128+1) because scripts and
// --resume key on one "interrupted, resumable" code.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	// The first stop signal cancels the context (commands stop cleanly); a
	// second one exits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		s := <-sigs
		if s == syscall.SIGHUP {
			// The terminal is gone: a write to a closed stdout pipe must
			// fail (EPIPE) rather than kill the tuner by SIGPIPE before
			// the trial is marked.
			signal.Ignore(syscall.SIGPIPE)
		}
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "tuner: second signal, exiting now")
		os.Exit(exitInterrupted)
	}()
	os.Exit(run(ctx, os.Args, os.Stdout, os.Stderr))
}
