#!/usr/bin/env bash
# Instructions per call (callgrind), see percall_instructions.py.  Needs valgrind (Debian: valgrind).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
n=5000
export OMPI_MCA_pml=ob1 OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}"
count() {   # total instructions of one run
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$here/percall_instructions.py" "$1" "$2" 2>&1 \
        | awk '/Collected/ {print $4}'
}
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
    mapfile -t names < <("$python" -c "import sys; sys.path.insert(0, '$here'); sys.argv = ['x']
import percall_instructions as m; print('\n'.join(m.STATEMENTS))")
fi
for name in "${names[@]}"; do
    base=$(count "$name" 0)
    full=$(count "$name" "$n")
    printf '%-26s %8d instructions per call\n' "$name" $(( (full - base) / n ))
done
