#!/usr/bin/env bash
# Run the examples as a batch job: under Slurm with srun, elsewhere with mpirun.
#
#   sbatch examples/job.sh                 # on a cluster (edit the #SBATCH lines)
#   bash examples/job.sh                   # on a workstation: NPROCS processes (default 4)
#
#SBATCH --job-name=mpicoll-examples
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --time=00:10:00
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}     # the Python that has mpicoll (e.g. .venv/bin/python)
if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    run() { srun --mpi=pmix "$PYTHON" "$@"; }                         # Slurm starts one task per rank
else
    run() { "$PYTHON" -m mpicoll.launch -n "${NPROCS:-4}" "$@"; }    # mpirun -n N python ... (+ what it needs)
fi

export MPICOLL_DEBUG=1        # check that all ranks call the collectives with matching arguments
run examples/cg_solver.py --n 200
run examples/train_data_parallel.py --steps 100
run -m pytest examples/test_my_mpi_code.py --with-mpi -q -p no:cacheprovider
