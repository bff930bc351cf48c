// Command vllm-sim is a stand-in for `vllm serve` with no GPU: it accepts
// vLLM's serve flags (argparse behaviour included), simulates the engine's
// startup memory accounting and its continuous-batching scheduler on the
// real clock, and serves the OpenAI API, /health and /metrics.
//
//	vllm-sim serve MODEL --gpu H100-80GB [vLLM flags] [--startup-scale 0.01]
//	vllm-sim --version
//
// Exit codes follow vLLM: 2 for argument errors, 1 for engine failures
// (startup or injected crashes), 0 after SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const topUsage = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, topUsage)
		return 2
	}
	switch args[0] {
	case "-v", "--version", "version":
		v := spaces.DefaultEngineVersion
		if env := os.Getenv("VLLM_SIM_VERSION"); env != "" {
			v = env
		}
		fmt.Fprintln(stdout, v)
		return 0
	case "-h", "--help":
		fmt.Fprintln(stdout, topUsage)
		return 0
	case "serve":
	default:
		fmt.Fprintln(stderr, topUsage)
		fmt.Fprintf(stderr, "vllm: error: argument subparser: invalid choice: '%s' (choose from 'chat', 'complete', 'serve', 'bench', 'collect-env', 'run-batch')\n", args[0])
		return 2
	}
	for _, a := range args[1:] {
		if a == "-h" || a == "--help" {
			fmt.Fprint(stdout, sim.ServeHelp())
			return 0
		}
	}
	opts, err := sim.ParseServeArgs(args[1:])
	if err != nil {
		var ae *sim.ArgError
		if errors.As(err, &ae) {
			fmt.Fprintln(stderr, sim.Usage)
			fmt.Fprintln(stderr, ae.Error())
			return 2
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	// A model the catalog lacks is read from its config.json, as vLLM does.
	home, _ := os.UserHomeDir()
	opts.HFCache = spaces.HFCacheDir(os.Getenv, home)
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if opts.Faults.IgnoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
		sigs = sigs[:1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	go func() {
		<-ctx.Done()
		stop() // a second signal terminates at once
	}()
	if err := sim.Serve(ctx, opts, stdout); err != nil {
		return 1
	}
	return 0
}
