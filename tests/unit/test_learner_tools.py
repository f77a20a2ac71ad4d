"""The exact cost of rotating algorithms, and the command line's answers to user mistakes."""

from __future__ import annotations

import pytest

from mpicoll.__main__ import main
from mpicoll.analysis.cost import cost
from mpicoll.analysis.presets import preset
from mpicoll.families import registry
from mpicoll.ir.schedule import Block, Copy, Recv, Reduce, Round, Send

ROTATING = [(c, a) for c in registry.collectives() for a in registry.algorithms(c) if registry.get(c, a).rotates]


def _shift(rnd: Round, r: int, p: int) -> Round:
    def b(x: Block) -> Block:
        return Block(x.buf, (x.lo + r) % p, (x.lo + r) % p + x.hi - x.lo)

    steps = tuple(Reduce(b(s.out), b(s.left), b(s.right)) if isinstance(s, Reduce) else Copy(b(s.out), b(s.src))
                  for s in rnd.steps)
    return Round(tuple(Send((m.peer + r) % p, b(m.block)) for m in rnd.sends),
                 tuple(Recv((m.peer + r) % p, b(m.block)) for m in rnd.recvs), steps)


def test_some_algorithms_rotate():
    assert ("allreduce", "ring") in ROTATING


@pytest.mark.parametrize(("collective", "algorithm"), ROTATING)
@pytest.mark.parametrize("size", [2, 3, 5, 8, 11])
def test_rotating_claim_holds(collective, algorithm, size):
    """rank r's schedule is rank 0's with peers and blocks shifted by r, as ``rotates=True`` declares."""
    zero = registry.schedule(collective, algorithm, 0, size)
    assert zero.nblocks == size
    for r in range(size):
        s = registry.schedule(collective, algorithm, r, size)
        assert s.rounds == tuple(_shift(x, r, size) for x in zero.rounds)


@pytest.mark.parametrize(("collective", "algorithm"), ROTATING)
@pytest.mark.parametrize("machine", [preset("nccl-summit"), preset("nccl-summit").with_nodes(4),
                                     preset("nccl-summit").with_nodes(None)])
def test_rotated_cost_equals_costing_every_rank(collective, algorithm, machine):
    for size in (2, 3, 7, 13, 16, 33):
        for nbytes in (0, 1, 8, 100, 4103):
            exact = cost(collective, algorithm, size, nbytes, machine, sample=False)
            fast = cost(collective, algorithm, size, nbytes, machine, sample=True)
            assert fast.time == pytest.approx(exact.time, rel=1e-12, abs=1e-18)
            assert fast.latency == pytest.approx(exact.latency, rel=1e-12, abs=1e-18)
            assert fast.rounds == exact.rounds and not fast.sampled


NODE_AWARE = [(c, a) for c in registry.collectives() for a in registry.algorithms(c)
              if "nodes" in registry.get(c, a).params and not registry.get(c, a).rotates]


@pytest.mark.parametrize(("collective", "algorithm"), NODE_AWARE)
@pytest.mark.parametrize("size", [2, 3, 5, 8, 11, 16])
def test_probed_rotation_of_node_aware_algorithms_on_one_node_holds_at_every_rank(collective, algorithm, size):
    """Where ranks 1, p/2 and p-1 say a node-aware algorithm on one node rotates, every rank does, and the
    rotated cost equals costing every rank."""
    from mpicoll.analysis.cost import _rotates_on_probes

    alg = registry.get(collective, algorithm)
    zero = alg.rounds(0, size)
    if not _rotates_on_probes(alg, zero, size, {}):
        return
    sched0 = registry.schedule(collective, algorithm, 0, size)
    for r in range(size):
        assert registry.schedule(collective, algorithm, r, size).rounds == tuple(
            _shift(x, r, size) if x else x for x in sched0.rounds)
    for nbytes in (0, 8, 4103):
        exact = cost(collective, algorithm, size, nbytes, preset("local"), sample=False)
        fast = cost(collective, algorithm, size, nbytes, preset("local"), sample=True)
        assert fast.time == pytest.approx(exact.time, rel=1e-12, abs=1e-18) and not fast.sampled


def test_the_hierarchical_allreduce_on_one_node_is_costed_exactly_at_24576_ranks():
    c = cost("allreduce", "hierarchical", 24576, 8, preset("local"))
    assert not c.sampled and c.time == pytest.approx(cost("allreduce", "ring", 24576, 8, preset("local")).time)


@pytest.mark.parametrize(("argv", "expected"), [
    (["show", "allreduce", "auto", "-p", "4"], "choose one of binomial"),
    (["show", "bcast", "binomial", "-p", "4", "--root", "9"], "0 <= root < 4"),
    (["show", "allreduce", "ring", "-p", "4", "--root", "1"], "allreduce has no root"),
    (["show", "allfoo", "ring", "-p", "4"], "choose one of allgather"),
    (["show", "allreduce", "rign", "-p", "4"], "choose one of binomial"),
    (["model", "allreduce", "-p", "4", "--bytes", "8", "--algorithms", "ring,nope"], "no algorithm 'nope'"),
    (["draw", "allreduce", "ring", "-p", "4", "-o", "/no/such/folder/x.png"], "does not exist"),
    (["draw", "allreduce", "ring", "-p", "64", "-o", "x.png"], "python -m mpicoll show allreduce ring -p 64"),
    (["show", "allreduce", "ring", "-p", "100000"], "--rank 0"),
    (["model", "allreduce", "-p", "4", "--bytes", "8", "--alpha", "1e-6"], "go together"),
])
def test_user_mistakes_get_one_line_with_the_choices(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["show", "allreduce", "ring", "-p", "0"], ["model", "allreduce", "-p", "4",
                                  "--bytes", "8", "--preset", "nope"], ["--version"]])
def test_argparse_answers_bad_values_and_version(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    out = capsys.readouterr()
    if argv == ["--version"]:
        assert info.value.code == 0 and out.out.startswith("mpicoll ")
        assert "mpicoll.engine._direct (MPI called from C): " in out.out   # in use, or why not
    else:
        assert info.value.code == 2 and ("positive integer" in out.err or "choose from" in out.err)


def test_broken_pipe_is_quiet():
    import subprocess
    import sys

    proc = subprocess.run(f"{sys.executable} -m mpicoll show allreduce ring -p 64 | head -1", shell=True,
                          capture_output=True, text=True)
    assert proc.stdout.startswith("allreduce / ring") and "Traceback" not in proc.stderr


def test_model_at_24576_ranks_costs_the_ring_exactly_and_fast():
    import time

    start = time.process_time()
    c = cost("allreduce", "ring", 24576, 8, preset("nccl-summit"))
    assert time.process_time() - start < 30 and not c.sampled and c.rounds == 2 * (24576 - 1)


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in ("show", "verify", "model", "draw", "calibrate", "bench", "osu", "autocheck", "launch"):
        assert f"    {name}" in out, name


def test_show_one_rank_builds_only_its_schedule():
    from mpicoll.tools import commands

    one = commands.show("allreduce", "ring", 100_000, rank=7)
    assert one.startswith("allreduce / ring: p = 100000") and "rank 7" in one and "send[6] -> 8" in one


@pytest.mark.parametrize("argv, expected", [
    (["bench", "allreduc"], "unknown collective 'allreduc'"),
    (["bench", "--algorithms", "rng"], "has no algorithm(s) rng"),
    (["bench", "--style", "osu", "bcst"], "unknown collective(s) bcst"),
])
def test_bench_usage_errors_under_mpi_are_one_line_on_one_rank(argv, expected):
    """Every rank finds the mistake before any message; rank 0 says it once, nobody calls MPI_Abort."""
    import subprocess
    import sys

    for _ in range(2):      # (once more where Open MPI's launcher could not start the job: no rank ran)
        proc = subprocess.run([sys.executable, "-m", "mpicoll.launch", "-n", "2", "-m", "mpicoll", *argv, "--quiet"],
                              capture_output=True, text=True, timeout=120)
        err = proc.stderr + proc.stdout
        if proc.returncode == 2 or "failed to start" not in err:
            break
    assert proc.returncode == 2, err[-2000:]
    assert err.count(expected) == 1 and "Traceback" not in err and "MPI_ABORT" not in err


def test_the_nccl_summit_figures_quoted_in_presets_hold():
    """mpicoll.analysis.presets quotes the model's tree times against NCCL's published ones."""
    from mpicoll.analysis.presets import NCCL_SUMMIT

    assert cost("allreduce", "double_binary_tree", 96, 8, NCCL_SUMMIT).time == pytest.approx(114e-6, rel=0.01)
    assert cost("allreduce", "double_binary_tree", 24576, 8, NCCL_SUMMIT).time == pytest.approx(277e-6, rel=0.01)


def test_model_states_the_assumptions_of_its_constants(capsys):
    assert main(["model", "allreduce", "-p", "96", "--bytes", "8", "--preset", "nccl-summit"]) == 0
    out = capsys.readouterr().out
    assert "double_binary_tree: alpha 5.1 us per message between nodes instead of 0.9 us" in out
    assert "every other algorithm pays the ring's 0.9 us" in out and "proxy thread" in out


@pytest.mark.parametrize("command", ["show", "verify", "draw"])
def test_help_describes_collective_and_algorithm(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "one of allgather" in out and "an algorithm of the collective" in out


def test_verify_says_which_cases_and_what_was_proved(capsys):
    assert main(["verify", "bcast", "binomial", "-p", "7"]) == 0
    out = capsys.readouterr().out
    assert "bcast/binomial: roots 0, 3, 6; out of place" in out and "each case proved: every rank ends" in out
