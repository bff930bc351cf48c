# tuner — build, test and demo targets. `make test` is what CI runs.
GO        ?= go
BIN       := bin
PKGS      := ./...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
FUZZTIME  ?= 10s
export CGO_CFLAGS := -Wno-deprecated-declarations

.PHONY: all build test test-stress unit race norace lint vet fmt-check bench eval-search eval-search-table eval-search-heldout eval-workloads bench-search fuzz soak demo docs-img clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/tuner ./cmd/tuner
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/vllm-sim ./cmd/vllm-sim

# The README's test command: lint, then every unit and integration test with
# the race detector, then the pure-computation tests without it (norace).
test: lint race norace

# The suite beside a documented, bounded CPU load (scripts/cpuload.sh:
# STRESS_LOOPS busy loops, default 6, for at most STRESS_SECONDS, default
# 1800): every test must hold on a busy machine (issue 29). The load ends
# with the suite.
STRESS_LOOPS   ?= 6
STRESS_SECONDS ?= 1800
test-stress:
	@./scripts/cpuload.sh $(STRESS_LOOPS) $(STRESS_SECONDS) & load=$$!; \
	$(MAKE) test; rc=$$?; kill $$load 2>/dev/null; wait $$load 2>/dev/null; exit $$rc

unit:
	$(GO) test -count=1 $(PKGS)

# The timeout guards against a hung test, not a slow machine: under
# `make test-stress` (load ~8 on 2 cores) cmd/tuner alone took more than
# 15 minutes with -race.
race:
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

# Pure-computation tests live in files named *_norace_test.go (build tag
# !race): single-goroutine number crunching (the simulator over the whole
# catalog, surrogate training sets) in which the race detector can find
# nothing and which it slows 5-10x. `make race` leaves them out; they run
# here once, without it (their concurrency, where any, is raced by smaller
# tests of the same code).
NORACE_FILES := $(shell git ls-files '*_norace_test.go' 2>/dev/null)
norace:
	@files="$(NORACE_FILES)"; [ -n "$$files" ] || exit 0; \
	pkgs=$$(for f in $$files; do echo ./$$(dirname $$f); done | sort -u | tr "\n" " "); \
	tests=$$(grep -ho '^func Test[A-Za-z0-9_]*' $$files | sed 's/^func //' | paste -sd'|' -); \
	echo "$(GO) test -count=1 -run '^($$tests)$$' $$pkgs"; \
	$(GO) test -count=1 -timeout 30m -run "^($$tests)\$$" $$pkgs

lint: vet fmt-check

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Every native fuzz target for FUZZTIME each (make fuzz FUZZTIME=5m for longer).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# The main job, end to end on the bundled simulator through the real process
# path: a short overnight search (12 trials, under 3 minutes on 2 cores), the
# recommendation as a vllm serve command line, and the Pareto plot.
DEMO_DB    := $(BIN)/demo.db
DEMO_MODEL := meta-llama/Llama-3.1-8B-Instruct
# Search-quality evaluation (issue 8; `tuner eval search`): random, auto_tune-style grid, TPE, the
# tuner and the warm-started tuner on four scenarios, on the virtual clock.
# Report (Markdown, JSON, SVG) in $(EVAL_OUT); ground truth cached in
# eval/testdata (recomputed when sim, space or scenarios change). About 10
# minutes on 2 cores; EVAL_ARGS=--quick for a smoke run.
EVAL_OUT  ?= eval-out
EVAL_ARGS ?= --seeds 10 --trials 48 --parallel 2
eval-search:
	nice $(GO) run ./cmd/tuner eval search $(EVAL_ARGS) --out $(EVAL_OUT)

# The shipped workloads on vllm-sim (live, real time): verdict, throughput
# CI, early stop and duration per trial.
eval-workloads: build
	$(BIN)/tuner eval workloads $(EVAL_WORKLOADS_ARGS)

# The README's search table (issue 28): every strategy on the four default
# scenarios and the scenario file's, against the fixed ground truth in
# eval/testdata; writes the table between the README's markers. CPU-heavy
# (tens of minutes on 2 cores): EVAL_TABLE_ARGS=--seeds 4 for a shorter run.
EVAL_SCENARIOS  := llama8b-h100-chat,llama8b-a100-short,llama70b-4xh100-long,qwen72b-8xh200-chat,qwen7b-l40s-short,llama8b-h200-rag,mistral7b-a100-longctx,mixtral-2xh100-chat
EVAL_TABLE_ARGS ?= --seeds 10 --trials 24 --parallel 2
eval-search-table:
	nice -n 19 $(GO) run ./cmd/tuner eval search --scenarios-file examples/eval-scenarios.yaml --scenarios $(EVAL_SCENARIOS) \
		--strategies random,grid,tpe,tuner,tuner-warm,par1,par4 --cache eval/testdata $(EVAL_TABLE_ARGS) --out $(EVAL_OUT) --readme README.md

# The held-out check (issue 28): the same strategies and goals on
# examples/eval-heldout.yaml's scenarios, which no setting of the search was
# chosen on; writes the README's held-out table. As CPU-heavy as the above.
EVAL_HELDOUT_ARGS ?= --seeds 10 --trials 24 --parallel 2
eval-search-heldout:
	nice -n 19 $(GO) run ./cmd/tuner eval search --scenarios-file examples/eval-heldout.yaml \
		--strategies random,grid,tpe,tuner,tuner-warm,par1,par4 --cache eval/testdata $(EVAL_HELDOUT_ARGS) --out $(EVAL_OUT)-heldout \
		--readme README.md --table heldout-table

# Old name of eval-search, kept for scripts.
bench-search: eval-search

# Long reliability soak: fault tests + 20 SIGKILL/resume cycles per engine
# (RELIABILITY_KILLS, ROUNDS, SEED).
soak:
	RELIABILITY_KILLS=$${RELIABILITY_KILLS:-20} GO=$(GO) ./scripts/soak.sh

demo: build
	rm -rf $(DEMO_DB) $(DEMO_DB).lock $(DEMO_DB).sessions $(BIN)/logs
	./$(BIN)/tuner --db $(DEMO_DB) search --model $(DEMO_MODEL) --gpu H100-80GB --engine sim \
	  --workload examples/demo-workload.yaml --extend 0 --slo 'tpot_p99<=40ms,ttft_p99<=2s' \
	  --trials 9 --finalists 2 --repeats 2 --budget 3m --log-dir $(BIN)/logs --engine-arg=--startup-scale=0.01
	./$(BIN)/tuner --db $(DEMO_DB) recommend --model $(DEMO_MODEL) --format command
	./$(BIN)/tuner --db $(DEMO_DB) pareto --model $(DEMO_MODEL) --svg $(BIN)/demo-front.svg --html $(BIN)/demo-front.html

# The README's two images (issue 27), from the simulator: the front chart of
# a short sim-virtual search (bin/tuner pareto --png) and the dashboard's
# trial page, as TestDashboardPagesInBrowser screenshots it (its fixture is
# a 12-trial sim-virtual job; needs Chromium). A few minutes on 2 cores.
DOCS_TMP := $(BIN)/docs-img
docs-img: build
	rm -rf $(DOCS_TMP) && mkdir -p $(DOCS_TMP) docs/img
	nice ./$(BIN)/tuner --db $(DOCS_TMP)/docs.db search --model $(DEMO_MODEL) --gpu H100-80GB --engine sim-virtual \
	  --workload chat --trials 12 --requests 200 --finalists 2 --repeats 2 --log-dir $(DOCS_TMP)/logs
	./$(BIN)/tuner --db $(DOCS_TMP)/docs.db pareto --model $(DEMO_MODEL) --png docs/img/front.png
	TUNER_DASHBOARD_SHOTS=$(abspath $(DOCS_TMP)) nice $(GO) test -count=1 -run '^TestDashboardPagesInBrowser$$' ./service
	cp $(DOCS_TMP)/trial-1280.png docs/img/trial.png
	ls -l docs/img/front.png docs/img/trial.png

clean:
	rm -rf $(BIN)
