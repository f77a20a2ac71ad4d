#!/usr/bin/env bash
# The measurements behind the figures of docs/performance.md at 2 processes, then the figures, in one command:
#
#   PYTHON=.venv/bin/python bash benchmarks/figures.sh [RESULTS_DIR] [FIGURES_DIR]
#
# Each step writes a JSON file into RESULTS_DIR (default benchmarks/results): mpi4py's OSU demos with
# mpicoll.Comm swapped in (osu_p2.json), every collective in OSU's style (bench_p2.json), the torch backend
# against Gloo (torch_p2.json; skipped when torch is not installed) and what reproducible=True costs
# (reproducible_p2.json).  Then python -m mpicoll.bench.figures draws every JSON file of RESULTS_DIR into
# FIGURES_DIR (default docs/images/perf).  Run it on an idle machine with 2 cores or more: about three minutes.
set -euo pipefail
py=${PYTHON:-python}
results=${1:-benchmarks/results}
figures=${2:-docs/images/perf}
mkdir -p "$results"
run() { "$py" -m mpicoll.launch -n 2 "$@"; }
run -m mpicoll osu --repeat 3 --json "$results/osu_p2.json"
run -m mpicoll bench --style osu all --sizes 8:4M:4 --iters 30 --quiet --json "$results/bench_p2.json"
if "$py" -c "import torch" 2> /dev/null; then
    run -m mpicoll.torch.bench --max-bytes 16M --rounds 9 --json "$results/torch_p2.json"
fi
run benchmarks/reproducible.py --sizes 8,64,1K,16K,64K,1M,16M --rounds 11 --json "$results/reproducible_p2.json"
"$py" -m mpicoll.bench.figures "$results"/*.json --out "$figures"
