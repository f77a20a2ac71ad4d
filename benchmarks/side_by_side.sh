#!/usr/bin/env bash
# The figures a runtime change must keep, measured side by side: two checkouts of mpicoll (each with its own
# .venv, made as the README says), run alternately round after round, so that a change of the machine's load
# hits both alike.  Two processes, on one machine; oversubscribed runs are noise.
#
#   bash benchmarks/side_by_side.sh BEFORE_DIR AFTER_DIR [OUT_DIR] [ROUNDS]
#
# Each round runs, in BEFORE_DIR and then in AFTER_DIR:
#   benchmarks/small_message_floor.py --calls 20000 --rounds 5    the blocking, persistent, I* and Barrier floor
#   python -m mpicoll osu --repeat 2                              mpi4py's OSU demos (geometric means)
#   benchmarks/intercomm.py                                       intercommunicator collectives
#   benchmarks/reproducible.py --rounds 5 --sizes 8,1K,64K        reproducible sums
#   benchmarks/objects.py --rounds 11                             object collectives against mpi4py's
#   python -m mpicoll.torch.bench --floor                         torch's all_reduce (where torch is installed)
# and appends its output to OUT_DIR/<benchmark>.txt under a line "== before|after round N time load".  Compare
# the sides' ratios round by round: within one round they saw the same load.
set -uo pipefail
before="${1:?BEFORE_DIR}" after="${2:?AFTER_DIR}" out="${3:-side_by_side}" rounds="${4:-2}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
run() {   # SIDE DIR NAME ARGS...: one benchmark in one checkout
    local side="$1" dir="$2" name="$3"
    shift 3
    echo "== $side round $round $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/$name.txt"
    (cd "$dir" && timeout 900 .venv/bin/python -m mpicoll.launch -n 2 "$@") >> "$out/$name.txt" 2>&1 \
        || echo "(failed: $?)" >> "$out/$name.txt"
}
for (( round = 1; round <= rounds; round++ )); do
    for side in before after; do
        dir="$before"; [[ "$side" == after ]] && dir="$after"
        run "$side" "$dir" floor benchmarks/small_message_floor.py --calls 20000 --rounds 5
        run "$side" "$dir" osu -m mpicoll osu --repeat 2
        run "$side" "$dir" intercomm benchmarks/intercomm.py
        run "$side" "$dir" reproducible benchmarks/reproducible.py --rounds 5 --sizes 8,1K,64K
        run "$side" "$dir" objects benchmarks/objects.py --rounds 11
        if "$dir/.venv/bin/python" -c "import torch" 2>/dev/null; then
            run "$side" "$dir" torch_floor -m mpicoll.torch.bench --floor
        fi
    done
done
echo "logs in $out"
