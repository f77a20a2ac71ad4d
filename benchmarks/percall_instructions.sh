#!/usr/bin/env bash
# Instructions per call (callgrind), see percall_instructions.py.  Needs valgrind (Debian: valgrind).
#   bash benchmarks/percall_instructions.sh [-n 1|2] [--by-object] [--calls N] [--tries T] [STATEMENT ...]
# -n 2: two processes, rank 0 under callgrind, rank 1 plain; --by-object: split each call by shared object;
# --tries T: at p = 2, run a statement up to T times while rank 0 polls more than twice a call (its peer was
# late: a loaded machine) and keep the run that polled least.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
n=5000 procs=1 tries=1 split=() names=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -n) procs="$2"; shift 2 ;;
        --calls) n="$2"; shift 2 ;;
        --tries) tries="$2"; shift 2 ;;
        --by-object) split=(--by-object); shift ;;
        *) names+=("$1"); shift ;;
    esac
done
# hwloc's x86 backend reads CPUID, which it refuses under valgrind (and says so on every run)
export HWLOC_COMPONENTS=-x86 OMPI_MCA_pml=ob1 OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
count() {   # NAME CALLS OUT: one run, rank 0's callgrind files written to OUT-01 (main thread), OUT-02, ...
    if [[ "$procs" -eq 1 ]]; then
        PERCALL_CALLGRIND_OUT="$3" "$python" "$here/percall_instructions.py" "$1" "$2"
    else
        PERCALL_CALLGRIND_OUT="$3" "$python" -m mpicoll.launch -n "$procs" --no-abort -- \
            "$here/percall_instructions.py" "$1" "$2"
    fi
}
if [[ ${#names[@]} -eq 0 ]]; then
    mapfile -t names < <("$python" "$here/percall_instructions.py" --names "$procs")
fi
echo "# p = $procs, $n calls counted after 10, rank 0's main thread under callgrind; instructions"
for name in "${names[@]}"; do
    rm -f "$work"/*
    count "$name" "$n" "$work/full.out"
    least=$("$python" "$here/percall_instructions.py" --polls "$work/full.out" "$n")
    for (( try = 2; try <= tries && least > 2; try++ )); do
        count "$name" "$n" "$work/again.out"
        polls=$("$python" "$here/percall_instructions.py" --polls "$work/again.out" "$n")
        if (( polls < least )); then
            least=$polls
            rm -f "$work"/full.out-*
            for file in "$work"/again.out-*; do mv "$file" "$work/full.out-${file##*-}"; done
        fi
        rm -f "$work"/again.out*
    done
    "$python" "$here/percall_instructions.py" --count "$name" "$work/full.out" "$n" "${split[@]}"
done
