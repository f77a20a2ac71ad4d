"""Time torch's collectives on "mpicoll" and on Gloo side by side, in one run, with nccl-tests' columns.

Run under MPI (every rank runs it)::

    python -m mpicoll.launch -n 2 -m mpicoll.torch.bench
    python -m mpicoll.launch -n 2 -m mpicoll.torch.bench --ops all_reduce --max-bytes 1M --inline
    python -m mpicoll.launch -n 2 -m mpicoll.torch.bench --ddp
    python -m mpicoll.launch -n 2 -m mpicoll.torch.bench --json torch_p2.json   # and keep the table

Each variant is a process group over every rank: ``mpicoll`` (the default
group: every call an mpicoll request, waited for at once by a blocking call,
advanced by mpicoll's progress thread for an asynchronous one),
``mpicoll-inline`` (``--inline``: asynchronous calls run to completion in the
caller) and ``gloo``.  For each collective and size, every
round times ``iters`` blocking calls of each variant (in an order that changes
from round to round), after a barrier; a variant's time is the slowest rank's
mean per call, and the table gives the median over the rounds.  Columns as in
nccl-tests: size (bytes: the all-reduce/broadcast buffer, the all-gather's
output, the reduce-scatter's input, the all-to-all's buffer), count
(elements), type, redop, time (us), algbw = size / time and busbw = algbw x
the collective's factor (GB/s), and #wrong: elements of the last call's result
that differ from the right answer.  ``x gloo`` is Gloo's time over mpicoll's.
``--ddp`` times a DDP training step (forward, backward with bucket
all-reduces, SGD step) on each variant instead; ``--overlap`` times an
asynchronous all-reduce of ``--max-bytes`` while the caller computes, and says
what share of the call the computation hid.  ``--floor`` times a blocking
all-reduce of ``--min-bytes`` through torch next to what it is made of: torch's
own cost (``dist.all_reduce`` into a backend method that does nothing),
``mpicoll.Comm``'s ``Allreduce`` and ``Iallreduce`` + ``Wait`` on the tensor's memory, and the call on a group
of ``Options(reproducible=True)``.  ``--json FILE`` writes the collectives' table (each variant's median
time per size) and the run's facts (:func:`mpicoll.tools.record.run_record`); :mod:`mpicoll.bench.figures`
draws it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.distributed as dist
from mpi4py import MPI

from . import Options
from .work import DoneWork

WORLD = MPI.COMM_WORLD
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
# nccl-tests' bus bandwidth factors (n processes)
BUS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
       "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "all_to_all": lambda n: (n - 1) / n}


def parse_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def sizes(low: int, high: int, factor: int) -> list[int]:
    out, s = [], low
    while s < high:
        out.append(s)
        s *= factor
    return out + [high]


class Case:
    """One collective at one size: buffers, the call, and the count of wrong elements afterwards."""

    def __init__(self, op: str, nbytes: int, rank: int, size: int) -> None:
        self.op, self.rank, self.size = op, rank, size
        per = max(1, nbytes // 4 // (size if op in ("all_gather", "reduce_scatter", "all_to_all") else 1))
        self.count = per * (size if op in ("all_gather", "reduce_scatter", "all_to_all") else 1)
        self.nbytes = self.count * 4
        self.per = per
        self.inp = torch.full((self.count if op != "all_gather" else per,), float(rank + 1))
        self.out = torch.empty(self.count if op != "reduce_scatter" else per)

    def call(self, group) -> None:
        op = self.op
        if op == "all_reduce":
            self.out.copy_(self.inp)
            dist.all_reduce(self.out, group=group)
        elif op == "broadcast":
            self.out.fill_(float(self.rank + 1))
            dist.broadcast(self.out, group_src=0, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(self.out, self.inp, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(self.out, self.inp, group=group)
        else:
            dist.all_to_all_single(self.out, self.inp, group=group)

    def wrong(self) -> int:
        n = self.size
        if self.op == "all_reduce" or self.op == "reduce_scatter":
            want = torch.full_like(self.out, float(n * (n + 1) / 2))
        elif self.op == "broadcast":
            want = torch.ones_like(self.out)
        else:  # all_gather, all_to_all: block j comes from rank j, whose value is j + 1
            want = torch.arange(1, n + 1, dtype=torch.float32).repeat_interleave(self.per)
        return int((self.out != want).sum())


def iterations(nbytes: int) -> int:
    """Calls per round: many for small messages, at least 2 for the largest."""
    return max(2, min(50, (32 << 20) // max(nbytes, 1)))


def time_round(case: Case, group, iters: int) -> float:
    """The slowest rank's mean seconds per call over ``iters`` calls."""
    WORLD.Barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        case.call(group)
    mine = (time.perf_counter() - t0) / iters
    return WORLD.allreduce(mine, op=MPI.MAX)


def measure(cases: dict[str, Case], groups: dict[str, object], rounds: int, iters: int,
            order: random.Random) -> dict[str, float]:
    """Median over rounds of each variant's time; the variants' order changes from round to round."""
    for name, group in groups.items():  # warm-up: first calls build plans and connections
        cases[name].call(group)
    times: dict[str, list[float]] = {name: [] for name in groups}
    for _ in range(rounds):
        names = list(groups)
        order.shuffle(names)  # the same seed on every rank: the same order everywhere
        for name in names:
            times[name].append(time_round(cases[name], groups[name], iters))
    return {name: statistics.median(ts) for name, ts in times.items()}


def table_header(variants: list[str]) -> str:
    head = f"{'collective':>14} {'size(B)':>10} {'count':>10} {'type':>6} {'redop':>5}"
    for v in variants:
        head += f" | {v + ' time(us)':>22} {'algbw':>7} {'busbw':>7} {'#wrong':>6}"
    return head + (" | x gloo" if "gloo" in variants else "")


def run_collectives(ns: argparse.Namespace, groups: dict[str, object]) -> None:
    rank, size = dist.get_rank(), dist.get_world_size()
    rows: list[dict] = []
    order = random.Random(ns.seed)
    variants = list(groups)
    if rank == 0:
        print(f"# torch {torch.__version__}, {size} processes, float32, median of {ns.rounds} rounds; "
              f"time = the slowest rank's mean per call; algbw/busbw in GB/s", flush=True)
        print(table_header(variants), flush=True)
    for op in ns.ops:
        for nbytes in sizes(ns.min_bytes, ns.max_bytes, ns.factor):
            cases = {v: Case(op, nbytes, rank, size) for v in variants}
            medians = measure(cases, groups, ns.rounds, iterations(nbytes), order)
            wrong = {v: WORLD.allreduce(cases[v].wrong(), op=MPI.SUM) for v in variants}
            if rank == 0:
                c = cases[variants[0]]
                line = f"{op:>14} {c.nbytes:>10} {c.count:>10} {'float':>6} {'sum' if 'reduce' in op else 'none':>5}"
                for v in variants:
                    t = medians[v]
                    algbw = c.nbytes / t / 1e9
                    line += f" | {t * 1e6:>22.1f} {algbw:>7.3f} {algbw * BUS[op](size):>7.3f} {wrong[v]:>6}"
                if "gloo" in medians:
                    line += f" | {medians['gloo'] / medians['mpicoll']:6.2f}"
                print(line, flush=True)
                rows.append({"op": op, "bytes": c.nbytes, "time_us": {v: medians[v] * 1e6 for v in variants},
                             "wrong": wrong})
    if rank == 0 and ns.json:
        from mpicoll.tools.record import run_record, write_json  # noqa: PLC0415

        command = " ".join(["python -m mpicoll.launch -n", str(size), "-m mpicoll.torch.bench", *ns.argv])
        write_json(ns.json, {"kind": "torch", "run": run_record(size, command), "torch": torch.__version__,
                             "rounds": ns.rounds, "dtype": "float32", "rows": rows})


def ddp_step_timer(group, width: int, depth: int, batch: int) -> Callable[[], None]:
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415

    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    net = DDP(torch.nn.Sequential(*layers), process_group=group)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    x, y = torch.randn(batch, width), torch.randn(batch, width)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()

    return step


def run_ddp(ns: argparse.Namespace, groups: dict[str, object]) -> None:
    rank = dist.get_rank()
    steps = {name: ddp_step_timer(g, ns.width, ns.depth, ns.batch) for name, g in groups.items()}
    params = ns.depth * (ns.width * ns.width + ns.width)
    order = random.Random(ns.seed)
    times: dict[str, list[float]] = {name: [] for name in groups}
    for name in groups:
        steps[name]()  # warm-up
    for _ in range(ns.rounds):
        names = list(groups)
        order.shuffle(names)
        for name in names:
            WORLD.Barrier()
            t0 = time.perf_counter()
            for _ in range(ns.steps):
                steps[name]()
            times[name].append(WORLD.allreduce((time.perf_counter() - t0) / ns.steps, op=MPI.MAX))
    if rank == 0:
        print(f"# DDP step: {ns.depth} x Linear({ns.width}, {ns.width}) + ReLU ({params * 4 / 2**20:.1f} MiB of "
              f"float32 gradients), batch {ns.batch}, {ns.steps} steps per round, median of {ns.rounds} rounds, "
              f"torch {torch.__version__}, {dist.get_world_size()} processes")
        for name, ts in times.items():
            print(f"{name:>16}: {statistics.median(ts) * 1e3:8.2f} ms per step")
        if "gloo" in times:
            print(f"{'x gloo':>16}: {statistics.median(times['gloo']) / statistics.median(times['mpicoll']):8.2f}")


def run_overlap(ns: argparse.Namespace, groups: dict[str, object]) -> None:
    """An asynchronous all-reduce while the caller computes: how much of the call hides behind the work."""
    rank = dist.get_rank()
    n = max(1, ns.max_bytes // 4)
    a = torch.randn(ns.width, ns.width)

    def compute() -> None:
        for _ in range(ns.matmuls):
            torch.mm(a, a)

    buffers = {name: torch.ones(n) for name in groups}

    def alone(name: str) -> None:
        dist.all_reduce(buffers[name], group=groups[name])

    def both(name: str) -> None:
        work = dist.all_reduce(buffers[name], group=groups[name], async_op=True)
        compute()
        work.wait()

    order = random.Random(ns.seed)
    times: dict[str, list[float]] = {}
    runs = [("compute", lambda: compute())] + [(f"{g} all_reduce", partial(alone, g)) for g in groups] + [
        (f"{g} all_reduce + compute", partial(both, g)) for g in groups]
    for _, fn in runs:
        fn()
    for _ in range(ns.rounds):
        order.shuffle(runs)
        for label, fn in runs:
            WORLD.Barrier()
            t0 = time.perf_counter()
            fn()
            times.setdefault(label, []).append(WORLD.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    if rank == 0:
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"# async all_reduce of {n * 4} bytes while the caller computes {ns.matmuls} x "
              f"mm({ns.width}x{ns.width}); median of {ns.rounds} rounds, slowest rank, torch {torch.__version__}, "
              f"{dist.get_world_size()} processes")
        print(f"{'compute alone':>34}: {med['compute'] * 1e3:8.2f} ms")
        for g in groups:
            call, together = med[f"{g} all_reduce"], med[f"{g} all_reduce + compute"]
            hidden = (med["compute"] + call - together) / call
            print(f"{g + ' all_reduce alone':>34}: {med[f'{g} all_reduce'] * 1e3:8.2f} ms")
            print(f"{g + ' all_reduce + compute':>34}: {med[f'{g} all_reduce + compute'] * 1e3:8.2f} ms "
                  f"(share of the call hidden: {hidden:.0%})")


def run_floor(ns: argparse.Namespace, groups: dict[str, object]) -> None:
    """A blocking all-reduce of --min-bytes through torch, and the pieces it is made of, side by side."""
    import os  # noqa: PLC0415

    pg = groups["mpicoll"]
    t = torch.zeros(max(1, ns.min_bytes // 4))     # (zeros: summed in place call after call, they stay finite)
    array, comm = t.numpy(), pg.comm
    done = DoneWork("nothing")
    calls: dict[str, Callable[[], object]] = {name: partial(dist.all_reduce, t, group=g) for name, g in groups.items()}
    reproducible = dist.new_group(backend="mpicoll", pg_options=Options(reproducible=True))
    calls["mpicoll, reproducible=True"] = partial(dist.all_reduce, t, group=reproducible)
    calls["torch -> no-op backend method"] = partial(dist.all_reduce, t, group=pg)
    calls["mpicoll.Comm.Allreduce"] = partial(comm.Allreduce, MPI.IN_PLACE, array)
    calls["mpicoll.Comm.Iallreduce + Wait"] = lambda: comm.Iallreduce(MPI.IN_PLACE, array).Wait()
    real = pg.allreduce
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = random.Random(ns.seed)
    for _ in range(ns.rounds):
        names = list(calls)
        order.shuffle(names)
        for name in names:
            pg.allreduce = (lambda tensors, opts=None: done) if name.startswith("torch ->") else real
            iters = 20 if name == "gloo" else 2000
            WORLD.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                calls[name]()
            times[name].append(WORLD.allreduce((time.perf_counter() - t0) / iters, op=MPI.MAX))
    pg.allreduce = real
    if dist.get_rank() == 0:
        print(f"# blocking all_reduce of {t.numel() * 4} bytes (float32 SUM) and its pieces; the slowest rank's mean "
              f"per call, best and median of {ns.rounds} rounds; torch {torch.__version__}, "
              f"{dist.get_world_size()} processes; load average {os.getloadavg()[0]:.2f}")
        for name, ts in times.items():
            print(f"{name:>32}: best {min(ts) * 1e6:8.2f} us   median {statistics.median(ts) * 1e6:8.2f} us")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated collectives (default: %(default)s)")
    parser.add_argument("--min-bytes", type=parse_bytes, default=8, help="smallest size (default: 8)")
    parser.add_argument("--max-bytes", type=parse_bytes, default=64 << 20, help="largest size (default: 64M)")
    parser.add_argument("--factor", type=int, default=8, help="size step factor (default: 8)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per size, or of DDP steps (default: 5; 15 with --ddp: a loaded machine's "
                             "load changes from second to second, and more rounds even it out)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the variants' order")
    parser.add_argument("--inline", action="store_true", help="also time mpicoll without its progress thread")
    parser.add_argument("--no-gloo", action="store_true", help="leave Gloo out")
    parser.add_argument("--ddp", action="store_true", help="time a DDP training step instead")
    parser.add_argument("--overlap", action="store_true",
                        help="time an async all_reduce of --max-bytes while the caller computes, instead")
    parser.add_argument("--floor", action="store_true",
                        help="time a blocking all_reduce of --min-bytes and the pieces it is made of, instead")
    parser.add_argument("--matmuls", type=int, default=20, help="overlap: matrix products per run (default: 20)")
    parser.add_argument("--width", type=int, default=512, help="DDP: layer width (default: 512)")
    parser.add_argument("--depth", type=int, default=4, help="DDP: layers (default: 4)")
    parser.add_argument("--batch", type=int, default=64, help="DDP: batch per rank (default: 64)")
    parser.add_argument("--steps", type=int, default=3, help="DDP: steps per round (default: 3)")
    parser.add_argument("--json", help="collectives: also write the table and the run's facts to this file")
    ns = parser.parse_args(argv)
    ns.argv = sys.argv[1:] if argv is None else list(argv)
    ns.rounds = ns.rounds or (15 if ns.ddp or ns.overlap or ns.floor else 5)
    ns.ops = [o for o in ns.ops.split(",") if o]
    unknown = [o for o in ns.ops if o not in OPS]
    if unknown:
        parser.error(f"unknown collectives {unknown}; choose from {OPS}")
    dist.init_process_group("mpicoll")
    groups: dict[str, object] = {"mpicoll": dist.group.WORLD}
    if ns.inline:
        groups["mpicoll-inline"] = dist.new_group(pg_options=Options(progress_thread=False))
    if not ns.no_gloo:
        groups["gloo"] = dist.new_group(backend="gloo")
    run = run_ddp if ns.ddp else run_overlap if ns.overlap else run_floor if ns.floor else run_collectives
    run(ns, groups)
    WORLD.Barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
