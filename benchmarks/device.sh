#!/usr/bin/env bash
# A lent GPU machine of 16 cores in one command of under 10 minutes: the GPU steps of gpu.sh and the 8- and
# 16-process steps of scaling.sh, arranged so that the timings that need idle cores get them.
#
#   PYTHON=.venv/bin/python bash benchmarks/scaling.sh prepare DIR   # here, with PyPI reachable
#   bash benchmarks/device.sh DIR OUT [SECONDS]                       # there, in a checkout (default 570 s)
#
# While the GPU steps run on 2 ranks (gpu.sh: tests2 bench2 suite2, under CUDA MPS when the machine has it),
# 8 processes run mpi4py's OSU demos (osu_p$small.txt) and the nccl-tests style sweep of every collective with its
# #wrong column (check_p$small.txt): 10 of the 16 cores busy.  Then, alone, 16 processes run the OSU demos
# (osu_p$large.txt), the same sweep (check_p$large.txt), and one death case under Open MPI's fault tolerance
# (death_p$large.txt).  Every step's time limit is cut to what is left of SECONDS, so that the files of the
# steps that ran always come back; steps.txt says what ran, for how long and how it ended.
set -uo pipefail

[ $# -ge 2 ] || { sed -n '2,6p' "$0" >&2; exit 2; }
dir=$(cd "$1" && pwd); mkdir -p "$2"; out=$(cd "$2" && pwd); total=${3:-570}
small=${SMALL:-8} large=${LARGE:-16}   # (other process counts: to try the script on a small machine)
repo=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
left() { echo $(( total - ($(date +%s) - start) )); }
step() {   # NAME LIMIT COMMAND...: run with the smaller of LIMIT and what is left, log how it ended
    local name=$1 limit=$2 t0; shift 2
    local room=$(( $(left) - 5 ))
    [ "$room" -lt "$limit" ] && limit=$room
    if [ "$limit" -lt 15 ]; then echo "$name: skipped, $(left) s left" >> "$out/steps.txt"; return; fi
    t0=$(date +%s)
    timeout -k 5 "$limit" "$@"
    echo "$name: exit $? after $(( $(date +%s) - t0 )) s (limit $limit)" >> "$out/steps.txt"
}

bash "$repo/benchmarks/gpu.sh" run "$dir" "$out" setup > /dev/null || { cat "$out/setup.txt"; exit 1; }
venv=/tmp/mpicoll-gpu-venv
export PATH="$venv/bin:$PATH" PYTHONPATH="$repo" MPICOLL_CACHE="$dir/cache" PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
cd "$repo" || exit 1
gpu_works() { timeout 60 python -c "import cupy; assert int(cupy.arange(4).sum()) == 6" > /dev/null 2>&1; }
if command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d && gpu_works; then
    echo "CUDA MPS started" >> "$out/steps.txt"
else   # (a daemon that started but serves no client is stopped again)
    command -v nvidia-cuda-mps-control > /dev/null && echo quit | nvidia-cuda-mps-control 2> /dev/null
    echo "CUDA MPS not started: the ranks time-slice the GPU" >> "$out/steps.txt"
fi

# the GPU steps (2 ranks), each with its own limit inside gpu.sh, in the background
GPU_JSON="$out/json" TESTS_LIMIT=150 TEST_TIMEOUT=45 BENCH_LIMIT=50 SUITE_LIMIT=80 step gpu "$(( $(left) - 190 ))" bash "$repo/benchmarks/gpu.sh" run "$dir" "$out" \
    tests2 bench2 suite2 > "$out/gpu_steps.txt" 2>&1 &
gpu=$!
# meanwhile 8 processes
step osu_p$small 100 python -m mpicoll.launch -n "$small" -m mpicoll.bench.osu --repeat 2 --json "$out/osu_p$small.json" > "$out/osu_p$small.txt" 2>&1
step check_p$small 60 python -m mpicoll.launch -n "$small" -m mpicoll.bench --style nccl all --sizes 8:1M:32 --iters 2 --warmup 1 \
    > "$out/check_p$small.txt" 2>&1
step autocheck_p$small 100 python -m mpicoll.launch -n "$small" -m mpicoll autocheck --sizes 8:4M:16 --iters 5 > "$out/autocheck_p$small.txt" 2>&1
wait "$gpu"
# alone: 16 processes
step osu_p$large 100 python -m mpicoll.launch -n "$large" -m mpicoll.bench.osu --repeat 2 --json "$out/osu_p$large.json" > "$out/osu_p$large.txt" 2>&1
step check_p$large 50 python -m mpicoll.launch -n "$large" -m mpicoll.bench --style nccl all --sizes 8:1M:32 --iters 2 --warmup 1 \
    > "$out/check_p$large.txt" 2>&1
for impl in mpicoll builtin; do
    step "death_p$large $impl" 20 python -m mpicoll.launch -n "$large" --with-ft ulfm tests/fault/deaths.py allreduce-ring during "$impl" \
        >> "$out/death_p$large.txt" 2>&1
done
command -v nvidia-cuda-mps-control > /dev/null && echo quit | nvidia-cuda-mps-control 2> /dev/null
for p in "$small" "$large"; do echo "p = $p: $(grep -h "all demos" "$out/osu_p$p.txt" 2> /dev/null)" >> "$out/steps.txt"; done
cat "$out/steps.txt"
