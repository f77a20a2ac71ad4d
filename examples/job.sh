#!/usr/bin/env bash
# Run the examples as a batch job: under Slurm with srun, elsewhere with mpirun.
#
#   sbatch examples/job.sh                 # on a cluster (edit the #SBATCH lines)
#   bash examples/job.sh                   # on a workstation: NPROCS processes (default 4)
#   PYTHON=/path/to/python bash examples/job.sh   # another interpreter than .venv/bin/python
#
#SBATCH --job-name=mpicoll-examples
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --time=00:10:00
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"   # sbatch runs a copy of this script: start where it was submitted

# The Python that has mpicoll: $PYTHON if set, else the README's .venv, else the active environment's python3.
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c "import mpicoll" 2>/dev/null; then
    echo "examples/job.sh: $PYTHON cannot import mpicoll; install it (README's first command) or set PYTHON=" >&2
    exit 2
fi
if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    run() { srun --mpi=pmix "$PYTHON" "$@"; }                         # Slurm starts one task per rank
else
    run() { "$PYTHON" -m mpicoll.launch -n "${NPROCS:-4}" "$@"; }    # mpirun -n N python ... (+ what it needs)
fi

export MPICOLL_DEBUG=1        # check that all ranks call the collectives with matching arguments
run examples/cg_solver.py --n 200
run examples/train_data_parallel.py --steps 100
run -m pytest examples/test_my_mpi_code.py --with-mpi -q -p no:cacheprovider
