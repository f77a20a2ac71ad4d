"""Instructions per call of mpicoll against the built-in, counted by callgrind.

Wall-clock timings of microsecond calls move with the machine's load; instruction
counts do not.  Run each statement 10 + N times under ``valgrind --tool=callgrind``,
counting only the last N calls (:data:`TIMED_LOOP`), and divide by N::

    bash benchmarks/percall_instructions.sh                  # every statement, one process
    bash benchmarks/percall_instructions.sh call_key_bcast mpicoll_bcast
    bash benchmarks/percall_instructions.sh -n 2 --by-object builtin_allreduce mpicoll_allreduce

With one process (``-n 1``, the default) a call never waits for a peer: the figure
is the Python and MPI library work of the call.  With ``-n 2`` rank 0 runs under
callgrind and rank 1 runs plain, about fifty times faster, so rank 1's messages
are normally there when rank 0 looks for them and rank 0's count is the work of a
call at p = 2 (rank 0 is the root of the rooted statements; the ``_receiver`` ones
make it a receiver).  On a loaded machine rank 1 is sometimes descheduled and rank 0
then spins in MPI's progress loop: each line gives the polls per call (calls of
:data:`POLL` from outside it) and the count less every poll beyond one a call (an
estimate: the polls' average cost, empty ones and the one that found the message
alike); ``--tries T`` runs a statement again while it polled more than twice a call.
``--by-object`` splits each call's instructions by the shared object they ran in
(:data:`GROUPS`: the Python interpreter, mpi4py's ``MPI.*.so``, NumPy, mpicoll's
compiled parts, the MPI library with its transport, libc) and names the functions
that cost most.  MPICH's wheel has no symbols for its progress loop, so there its
polls are not counted and stay in the MPI library's figure.

This file is also the program each run executes: ``python percall_instructions.py
NAME N`` (under ``mpicoll.launch`` for ``-n 2``; with ``PERCALL_CALLGRIND_OUT`` set, rank 0
re-executes itself under callgrind writing that file), and
``python percall_instructions.py --count NAME PREFIX N [--by-object]`` prints what a run's files say.
"""

from __future__ import annotations

import collections
import itertools
import os
import re
import sys


def _rank_from_launcher() -> int:
    """This process's rank as the launcher set it (0 when started without one)."""
    for variable in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if variable in os.environ:
            return int(os.environ[variable])
    return 0


#: the C function of CPython that runs the counted calls (``deque(..., maxlen=0).extend``): callgrind counts
#: only what runs inside it, so neither start-up nor MPI's finalisation (where the ranks wait for each other
#: as long as the load makes them) is in the figures
TIMED_LOOP = "deque_extend"


def timed_loop(statement, calls: int) -> None:
    """Call ``statement()`` ``calls`` times from inside :data:`TIMED_LOOP`."""
    collections.deque(itertools.starmap(statement, itertools.repeat((), calls)), maxlen=0)


def _run_rank0_under_callgrind() -> None:
    """Rank 0 replaces itself by the same command under callgrind, before MPI starts."""
    out = os.environ.get("PERCALL_CALLGRIND_OUT")
    if out and _rank_from_launcher() == 0 and not os.environ.get("PERCALL_UNDER_CALLGRIND"):
        os.environ["PERCALL_UNDER_CALLGRIND"] = "1"
        os.execvp("valgrind", ["valgrind", "--tool=callgrind", "--quiet", "--separate-threads=yes",
                               "--collect-atstart=no", f"--toggle-collect={TIMED_LOOP}",
                               f"--callgrind-out-file={out}", sys.executable, *sys.argv])


# -- the split of a callgrind file by object and function ---------------------------------------------------

GROUPS = (   # (group, pattern on the object's path), first match wins
    ("Python interpreter", r"libpython|/python3?(\.\d+)?$"),
    ("mpi4py (MPI.*.so)", r"/mpi4py/"),
    ("NumPy", r"/numpy/|/numpy\.libs/|openblas"),
    ("mpicoll (compiled)", r"/mpicoll/(program|engine|data)/_\w+\."),
    ("MPI library + transport", r"/lib(mpi|mpich|open-|pmix|prrte|event|hwloc|ucp|ucs|uct|fabric|ucm)|/mca_"),
    ("libc, libm, ld.so", r"/(libc|libm|libpthread|ld-linux)[.-]"),
)


#: the MPI library's progress loop: one call of it is one poll for incoming messages (Open MPI, MPICH)
POLL = re.compile(r"^(opal_progress|MPID_Progress_test|MPIDI_progress_test)$")


def self_costs(path: str) -> tuple[int, collections.Counter, int, int]:
    """A callgrind file's total, the self cost (first event, Ir) of each (object, function), and the number of
    polls (calls of :data:`POLL` from outside it) with their inclusive cost."""
    names: dict[tuple[str, str], str] = {}
    costs: collections.Counter = collections.Counter()
    obj = function = callee = ""
    skip_next = poll_next = False
    total = polls = poll_cost = 0

    def name(kind: str, value: str) -> str:   # "(id) name" defines an id, "(id)" uses it
        match = re.match(r"\((\d+)\)\s*(.*)", value)
        if not match:
            return value
        if match.group(2):
            names[kind, match.group(1)] = match.group(2)
        return names[kind, match.group(1)]

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line[0] in "0123456789+-*":
                fields = line.split()
                cost = int(fields[1]) if len(fields) > 1 else 0
                if not skip_next:
                    costs[obj, function] += cost
                elif poll_next:
                    poll_cost += cost
                skip_next = poll_next = False
            elif line.startswith("ob="):
                obj = name("ob", line[3:].strip())
            elif line.startswith("fn="):
                function = re.sub(r"'\d+$", "", name("fn", line[3:].strip()))
            elif line.startswith("cob="):
                name("ob", line[4:].strip())
            elif line.startswith("cfn="):
                callee = re.sub(r"'\d+$", "", name("fn", line[4:].strip()))
            elif line.startswith(("fl=", "fi=", "fe=", "cfi=", "cfl=")):
                name("fl", line.split("=", 1)[1].strip())
            elif line.startswith("calls="):
                skip_next = True
                poll_next = bool(POLL.match(callee)) and not POLL.match(function)
                polls += int(line[6:].split()[0]) if poll_next else 0
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
    return total, costs, polls, poll_cost


def group_of(obj: str) -> str:
    """The group an object's path belongs to (``other`` if none)."""
    return next((group for group, pattern in GROUPS if re.search(pattern, obj)), "other")


def thread_files(prefix: str) -> list[str]:
    """The files of one run, main thread first (callgrind writes ``PREFIX-01``, ``PREFIX-02``, ... per thread)."""
    import glob
    return sorted(glob.glob(glob.escape(prefix) + "-[0-9]*"), key=lambda path: int(path.rsplit("-", 1)[1]))


def print_counts(name: str, prefix: str, calls: int, by_object: bool, top: int = 4) -> None:
    """One statement's instructions per call in a run of ``calls`` calls: the main thread's, the other threads'
    (MPI's and mpicoll's progress threads), and with ``by_object`` the main thread's split."""
    main, *rest = thread_files(prefix)
    total, costs, polls, poll_cost = self_costs(main)
    others = sum(self_costs(path)[0] for path in rest)
    per_call, polls, poll_cost = total / calls, polls / calls, poll_cost / calls
    # a poll that finds nothing is repeated while the peer is late: at most one per call is the call's work
    idle = (polls - 1) * poll_cost / polls if polls > 1 else 0.0
    print(f"{name:<26} {per_call:9,.0f} per call, {per_call - idle:9,.0f} less repeated polls"
          f"   ({polls:.1f} polls costing {poll_cost:,.0f}; other threads {others / calls:,.0f})")
    if not by_object:
        return
    by_function = {key: cost / calls for key, cost in costs.items()}
    by_group: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    for (obj, function), cost in by_function.items():
        label = function if not function.startswith("0x") else f"{os.path.basename(obj)}:{function}"
        by_group[group_of(obj)].append((cost, label))
    for group in [g for g, _ in GROUPS] + ["other"]:
        entries = sorted(by_group.get(group, []), reverse=True)
        subtotal = sum(cost for cost, _ in entries)
        if round(subtotal) == 0:
            continue
        named = ", ".join(f"{function} {cost:,.0f}" for cost, function in entries[:top] if cost >= 50)
        print(f"    {group:<24} {subtotal:8,.0f}   {named}")
    if idle:
        print(f"    {'repeated polls (above)':<24} {-idle:8,.0f}   waiting for the peer, mostly in the MPI library")


# -- the statements --------------------------------------------------------------------------------

def statements() -> dict:
    """Every statement this file can count, on the world communicator and mpicoll's over it."""
    import mmap

    import numpy as np
    from mpi4py import MPI

    import mpicoll
    from mpicoll.comm.dispatch import run_blocking
    from mpicoll.engine.blocking import execute
    from mpicoll.program.callkey import _call_key, call_key

    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    region, gathered = mmap.mmap(-1, 1 << 20), mmap.mmap(-1, 1 << 20)   # as mpi4py's OSU demos allocate theirs
    x, y, byte = np.ones(1), np.empty(1), np.zeros(1, np.uint8)
    comm.Bcast([region, 1, MPI.BYTE], 0)
    comm.Allreduce(x, y)
    bcast_key = call_key("Bcast", ([region, 1, MPI.BYTE], 0), "auto")
    state = comm._state
    # Scatter and Gather of 1 byte a rank as mpi4py's OSU demos call them: in place at the root (rank 0)
    root = world.rank == 0
    scatter_args = ([region, 1, MPI.BYTE], MPI.IN_PLACE) if root else (None, [gathered, 1, MPI.BYTE])
    gather_args = (MPI.IN_PLACE, [gathered, 1, MPI.BYTE]) if root else ([region, 1, MPI.BYTE], None)
    many = [42] * world.size
    objects = {   # name: (communicator -> one call of it)
        "allgather": lambda c: lambda: c.allgather(42),
        "allreduce": lambda c: lambda: c.allreduce(42),
        "bcast": lambda c: lambda: c.bcast(42, 0),
        "gather": lambda c: lambda: c.gather(42, 0),
        "scatter": lambda c: lambda: c.scatter(many, 0),
        "alltoall": lambda c: lambda: c.alltoall(many),
    }
    made: list = []   # persistent requests, made by the first Start/Wait statement that runs (only its own)

    def start_wait(make):
        def call() -> None:
            if not made:
                made.append(make())
            made[0].Start()
            made[0].Wait()
        return call

    def run_bcast_plan() -> None:   # p = 1 only: at p = 2 the call runs without a cached plan of rounds
        execute(state.plans.get(bcast_key).rounds(), state.private, 5)

    chosen = {
        "builtin_bcast": lambda: world.Bcast([region, 1, MPI.BYTE], 0),
        "mpicoll_bcast": lambda: comm.Bcast([region, 1, MPI.BYTE], 0),
        "builtin_bcast_numpy": lambda: world.Bcast(byte, 0),
        "mpicoll_bcast_numpy": lambda: comm.Bcast(byte, 0),
        "builtin_bcast_receiver": lambda: world.Bcast([region, 1, MPI.BYTE], world.size - 1),   # rank 0 receives
        "mpicoll_bcast_receiver": lambda: comm.Bcast([region, 1, MPI.BYTE], world.size - 1),
        "builtin_bcast_numpy_receiver": lambda: world.Bcast(byte, world.size - 1),
        "mpicoll_bcast_numpy_receiver": lambda: comm.Bcast(byte, world.size - 1),
        "builtin_allreduce": lambda: world.Allreduce(x, y),
        "mpicoll_allreduce": lambda: comm.Allreduce(x, y),
        "builtin_allreduce_init": start_wait(lambda: world.Allreduce_init(x, y)),
        "mpicoll_allreduce_init": start_wait(lambda: comm.Allreduce_init(x, y)),
        "builtin_iallreduce": lambda: world.Iallreduce(x, y).Wait(),
        "mpicoll_iallreduce": lambda: comm.Iallreduce(x, y).Wait(),
        "builtin_iallreduce_waitall": lambda: MPI.Request.Waitall([world.Iallreduce(x, y)]),
        "mpicoll_iallreduce_waitall": lambda: MPI.Request.Waitall([comm.Iallreduce(x, y)]),
        "builtin_barrier": world.Barrier,
        "mpicoll_barrier": comm.Barrier,
        "builtin_scatter": lambda: world.Scatter(*scatter_args, 0),
        "mpicoll_scatter": lambda: comm.Scatter(*scatter_args, 0),
        "builtin_gather": lambda: world.Gather(*gather_args, 0),
        "mpicoll_gather": lambda: comm.Gather(*gather_args, 0),
        # the lowercase object collectives of one int (mpi4py's pickle-based calls, and mpicoll's)
        **{f"{kind}_{name}_object": make(on) for kind, on in (("builtin", world), ("mpicoll", comm))
           for name, make in objects.items()},
        "mpicoll_bcast_no_method": lambda: run_blocking(comm, "Bcast", "auto", [region, 1, MPI.BYTE], 0),
        "call_key_bcast": lambda: call_key("Bcast", ([region, 1, MPI.BYTE], 0), "auto"),
        "call_key_bcast_numpy": lambda: call_key("Bcast", (byte, 0), "auto"),
        "call_key_allreduce": lambda: call_key("Allreduce", (x, y, MPI.SUM), "auto"),
        "python_call_key_bcast": lambda: _call_key("Bcast", ([region, 1, MPI.BYTE], 0), "auto"),
        "python_call_key_allreduce": lambda: _call_key("Allreduce", (x, y, MPI.SUM), "auto"),
        "cache_lookup": lambda: state.plans.get(bcast_key),
        "execute_bcast_plan": run_bcast_plan,
        "numpy_add_in_place": lambda: np.add(x, y, out=y),
        "loop_only": lambda: None,
    }
    chosen["free"] = lambda: [request.Free() for request in made]
    return chosen


NAMES = [
    "builtin_bcast", "mpicoll_bcast", "builtin_bcast_numpy", "mpicoll_bcast_numpy", "builtin_bcast_receiver",
    "mpicoll_bcast_receiver", "builtin_bcast_numpy_receiver", "mpicoll_bcast_numpy_receiver", "builtin_allreduce",
    "mpicoll_allreduce", "builtin_allreduce_init", "mpicoll_allreduce_init", "builtin_iallreduce",
    "mpicoll_iallreduce", "builtin_iallreduce_waitall", "mpicoll_iallreduce_waitall",
    "builtin_barrier", "mpicoll_barrier", "builtin_scatter", "mpicoll_scatter",
    "builtin_gather", "mpicoll_gather",
    *(f"{kind}_{name}_object" for name in ("allgather", "allreduce", "bcast", "gather", "scatter", "alltoall")
      for kind in ("builtin", "mpicoll")),
    "mpicoll_bcast_no_method", "call_key_bcast", "call_key_bcast_numpy",
    "call_key_allreduce",
    "python_call_key_bcast", "python_call_key_allreduce", "cache_lookup", "execute_bcast_plan",
    "numpy_add_in_place", "loop_only",
]


ONE_PROCESS_ONLY = {"execute_bcast_plan"}


def main(argv: list[str]) -> None:
    """``NAME N``: run a statement 10 + N times; ``--count NAME PREFIX N [--by-object]``: print its counts
    from a run's files; ``--polls PREFIX N``: a run's polls per call; ``--names [P]``: the statements' names
    (those that run at P processes)."""
    if argv[:1] == ["--names"]:   # [P]: those that run at P processes
        print("\n".join(n for n in NAMES if argv[1:] in ([], ["1"]) or n not in ONE_PROCESS_ONLY))
    elif argv[:1] == ["--polls"]:   # polls per call of a run's main thread, over N calls (a run that
        total, _, polls, _ = self_costs(thread_files(argv[1])[0])   # counted nothing: seen once, tried again)
        print(round(polls / max(1, int(argv[2]))) if total else 10**6)
    elif argv[:1] == ["--count"]:
        print_counts(argv[1], argv[2], int(argv[3]), "--by-object" in argv[4:])
    else:
        _run_rank0_under_callgrind()
        chosen = statements()
        statement, repeat = chosen[argv[0]], int(argv[1])
        for _ in range(10):
            statement()
        timed_loop(statement, repeat)
        chosen["free"]()


if __name__ == "__main__":
    main(sys.argv[1:])
