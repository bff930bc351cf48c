"""Writes the bench import fixtures: one result per vLLM bench schema
generation (current serve.py, the serve.py before it, benchmark_serving.py)
and hostile variants of the current one. Figures are consistent with the
arrays (rates = counts / duration). Run: python3 gen.py"""
import copy, json, statistics

ins = [128, 128, 1024, 1024, 128, 8192]
outs = [4, 3, 5, 0, 2, 6]
ttfts = [0.05, 0.062, 0.12, 0.0, 0.055, 0.3]
itls = [[0.01, 0.012, 0.011], [0.01, 0.01], [0.02, 0.022, 0.021, 0.019], [], [0.011], [0.03, 0.031, 0.029, 0.03, 0.032]]
errors = ["", "", "", "Service Unavailable", "", ""]
ok = [i for i in range(6) if errors[i] == ""]
dur = 1.2
lat = [ttfts[i] + sum(itls[i]) if errors[i] == "" else 0.0 for i in range(6)]
tin = sum(ins[i] for i in ok)
tout = sum(outs[i] for i in ok)


def base():
    return {
        "date": "20261202-101500", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 6, "request_rate": "inf",
        "burstiness": 1.0, "max_concurrency": 4, "duration": dur, "completed": len(ok),
        "total_input_tokens": tin, "total_output_tokens": tout, "request_throughput": len(ok) / dur,
        "output_throughput": tout / dur, "total_token_throughput": (tin + tout) / dur,
        "mean_ttft_ms": 117.4, "median_ttft_ms": 62.0, "std_ttft_ms": 95.1, "p99_ttft_ms": 292.7,
        "mean_tpot_ms": 17.3, "median_tpot_ms": 11.0, "std_tpot_ms": 8.0, "p99_tpot_ms": 30.4,
        "mean_itl_ms": 19.0, "median_itl_ms": 19.5, "std_itl_ms": 8.1, "p99_itl_ms": 31.9,
        "mean_e2el_ms": 230.0, "median_e2el_ms": 100.0, "std_e2el_ms": 150.0, "p99_e2el_ms": 449.0,
    }


def arrays(d, latencies=False, queues=False, starts=True):
    d.update({"input_lens": ins, "output_lens": outs, "ttfts": ttfts, "itls": itls, "generated_texts": ["a"] * 6, "errors": errors})
    if starts:
        d["start_times"] = [1000.0 + 0.1 * i for i in range(6)]
    if latencies:
        d["latencies"] = lat
    if queues:
        d["queue_times"] = [0.0, 0.0, 0.0, 0.0, 0.05, 0.1]


current = base()
current.update({"endpoint_type": "vllm", "label": None, "failed": 1, "request_goodput": None,
                "max_output_tokens_per_s": 12.0, "max_concurrent_requests": 4, "rtfx": 0.0,
                "mean_client_queue_time_ms": 25.0, "median_client_queue_time_ms": 0.0, "std_client_queue_time_ms": 40.0,
                "p99_client_queue_time_ms": 98.0, "gpu": "H100", "spec_decode_per_position_acceptance_rates": [0.8, 0.6]})
arrays(current, latencies=True, queues=True)

previous = base()
previous.update({"endpoint_type": "vllm", "label": "nightly", "failed": 1, "request_goodput": 3.3333,
                 "max_output_tokens_per_s": 12.0, "max_concurrent_requests": 4,
                 "p90_ttft_ms": 200.0, "p95_ttft_ms": 250.0, "p90_itl_ms": 30.0, "p95_itl_ms": 31.0,
                 "p90_tpot_ms": 25.0, "p95_tpot_ms": 28.0, "p90_e2el_ms": 400.0, "p95_e2el_ms": 420.0})
arrays(previous)

older = base()  # benchmark_serving.py: no failed, peaks, endpoint_type, label; summary only
older.update({"request_rate": 8.0, "max_concurrency": None, "request_goodput": None})
del older["mean_e2el_ms"], older["median_e2el_ms"], older["std_e2el_ms"], older["p99_e2el_ms"]

files = {"current.json": current, "previous.json": previous, "older.json": older}


def hostile(name, fn, raw=None):
    d = copy.deepcopy(current)
    fn(d)
    files["hostile-" + name + ".json"] = d


hostile("duration-1e308", lambda d: d.update(duration=1e308))
hostile("completed-million", lambda d: d.update(completed=1000000))
hostile("itl-1e300", lambda d: d.update(p99_itl_ms=1e300))
hostile("itls-array-1e300", lambda d: d["itls"][0].__setitem__(1, 1e300))
hostile("percentiles-decrease", lambda d: d.update(p99_ttft_ms=50.0))
hostile("date-1734", lambda d: d.update(date="17340101-000000"))
hostile("rates-disagree", lambda d: d.update(request_throughput=400.0))
hostile("latency-longer-than-run", lambda d: d["latencies"].__setitem__(5, 30.0))
hostile("goodput-above-throughput", lambda d: d.update(request_goodput=50.0))
hostile("fractional-count", lambda d: d.update(total_output_tokens=20.5))
hostile("lengths-disagree-totals", lambda d: d["output_lens"].__setitem__(0, 10**11))
hostile("arrays-disagree-completed", lambda d: d.update(completed=4, request_throughput=4 / dur))

for name, d in files.items():
    with open(name, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
# Python writes NaN bare, as vLLM does for the mean of no values.
s = json.dumps(current, indent=1).replace('"std_tpot_ms": 8.0', '"std_tpot_ms": NaN')
open("hostile-nan.json", "w").write(s + "\n")
