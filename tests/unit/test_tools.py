"""python -m mpicoll show / verify / model / draw, the cost model and the presets."""

from __future__ import annotations

import json
import math
import sys

import pytest

from mpicoll.__main__ import main
from mpicoll.analysis.cost import Machine, cost, lower_bound, sample_ranks
from mpicoll.analysis.presets import NCCL_SUMMIT, preset
from mpicoll.families import registry
from mpicoll.ir.schedule import Block, Scratch, Timeline
from mpicoll.selection import choose as selection

TEST_SCRATCH = {"incoming": Scratch("the partner's part"), "acc": Scratch("a partial sum")}   # hand-written builds

M = Machine(alpha=2e-6, beta=1e-9, gamma=3e-10)
CASES = [(c, a) for c in registry.collectives() for a in registry.algorithms(c)]


def params(collective, algorithm, size, nbytes):
    _, ps = selection.choose(collective, algorithm, size=size, nbytes=nbytes, count=max(1, nbytes // 8))
    if "root" in registry.get(collective, algorithm).params:
        ps["root"] = 0
    return ps


# ---- show -------------------------------------------------------------------------------------

def test_show_prints_the_table_and_one_rank(capsys):
    assert main(["show", "allreduce", "ring", "-p", "4"]) == 0
    out = capsys.readouterr().out
    assert "rank 3" in out and "send[3] -> 1" in out and "recv[2] = incoming[2] + send[2]" in out
    assert main(["show", "allreduce", "ring", "-p", "4", "--rank", "2"]) == 0
    out = capsys.readouterr().out
    assert "rank 2" in out and "rank 1 " not in out.splitlines()[1]


def test_show_rejects_bad_arguments(capsys):
    assert main(["show", "allreduce", "ring", "-p", "4", "--rank", "4"]) == 2
    assert "--rank" in capsys.readouterr().err
    assert main(["show", "allreduce", "nope", "-p", "4"]) == 2
    assert "no algorithm" in capsys.readouterr().err


# ---- verify -----------------------------------------------------------------------------------

def test_verify_command_passes_on_registered_algorithms(capsys):
    assert main(["verify", "allreduce", "-p", "1,2,3,5", "-p", "8"]) == 0
    assert "verified" in capsys.readouterr().out


class TestVerifyCatchesBrokenSchedules:
    def setup_method(self):
        def build(rank, size):  # a ring reduce-scatter that forgets its last step
            tl = Timeline()
            for s in range(size - 2):
                b_send, b_recv = (rank - s - 1) % size, (rank - s - 2) % size
                tl.send(s, (rank + 1) % size, Block("send" if s == 0 else "recv", b_send, b_send + 1))
                tl.recv(s, (rank - 1) % size, Block("incoming", b_recv, b_recv + 1))
                tl.reduce(s, Block("recv", b_recv, b_recv + 1), Block("incoming", b_recv, b_recv + 1),
                          Block("send", b_recv, b_recv + 1))
            return size, tl.rounds()

        def unmatched(rank, size):
            tl = Timeline()
            tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
            if rank == 1:
                tl.send(2, 0, Block("send", 0, 1))
            return 1, tl.rounds()

        registry.register("allreduce", "broken", keeps_order=False, scratch=TEST_SCRATCH)(build)
        registry.register("allreduce", "unmatched", keeps_order=False)(unmatched)
        registry._schedule.cache_clear()

    def teardown_method(self):
        registry._REGISTRY["allreduce"].pop("broken", None)
        registry._REGISTRY["allreduce"].pop("unmatched", None)
        registry._schedule.cache_clear()

    def test_wrong_result_names_everything(self, capsys):
        assert main(["verify", "allreduce", "broken", "-p", "4"]) == 1
        err = capsys.readouterr().err
        assert "allreduce/broken p=4" in err and "rank" in err and "recv[" in err

    def test_unmatched_message_names_round(self, capsys):
        assert main(["verify", "allreduce", "unmatched", "-p", "3"]) == 1
        err = capsys.readouterr().err
        assert "p=3 rank 1 round 2" in err and "never received" in err and "send[0]" in err


# ---- model ------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [2, 3, 8, 13])
def test_ring_allreduce_terms_are_exactly_the_textbook_ones(size):
    n = size * 1000
    c = cost("allreduce", "ring", size, n, M)
    p = size
    assert c.latency == pytest.approx(2 * (p - 1) * M.alpha, rel=1e-12)
    assert c.bandwidth == pytest.approx(2 * (p - 1) / p * n * M.beta, rel=1e-12)
    assert c.reduction == pytest.approx((p - 1) / p * n * M.gamma, rel=1e-12)


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_no_algorithm_beats_the_lower_bound(collective, algorithm):
    if collective.startswith("neighbor_"):
        pytest.skip("a neighbourhood's lower bound depends on its topology")
    for size in (1, 2, 3, 5, 8, 13, 64):
        for n in (8, 4096, 1 << 20):
            for machine in (M, NCCL_SUMMIT):
                c = cost(collective, algorithm, size, n, machine, **params(collective, algorithm, size, n))
                assert c.time >= lower_bound(collective, size, n, machine) * (1 - 1e-12), (size, n, machine.name)


def test_rabenseifner_doubles_its_bandwidth_term_one_past_a_power_of_two():
    n = 1 << 20
    for k in (3, 4, 6):
        base = cost("allreduce", "rabenseifner", 2 ** k, n, M).bandwidth
        plus = cost("allreduce", "rabenseifner", 2 ** k + 1, n, M).bandwidth
        assert 1.8 < plus / base < 2.3, k


def _bcast_or_skip(name):
    if "bcast" not in registry.collectives() or name not in registry.algorithms("bcast"):
        pytest.skip(f"bcast {name} is not registered yet")


def test_two_tree_bcast_moves_about_n_beta():
    _bcast_or_skip("double_binary_tree")
    n, p = 64 << 20, 64
    two = cost("bcast", "double_binary_tree", p, n, M, **params("bcast", "double_binary_tree", p, n))
    assert two.bandwidth < 1.4 * n * M.beta
    for one_tree in ("binary_tree", "pipelined_binary_tree"):
        if one_tree in registry.algorithms("bcast"):
            single = cost("bcast", one_tree, p, n, M, **params("bcast", one_tree, p, n))
            assert single.bandwidth > 1.6 * n * M.beta


def test_double_binary_tree_allreduce_keeps_ring_order_bandwidth_and_log_latency():
    n = 64 << 20
    for p in (16, 63, 64):
        tree = cost("allreduce", "double_binary_tree", p, n, M, segments=64)
        ring = cost("allreduce", "ring", p, n, M)
        assert tree.bandwidth < 1.5 * 2 * n * M.beta           # about 2 n beta, as the ring
        small = cost("allreduce", "double_binary_tree", p, 8, M, segments=1)
        assert small.rounds == 2 * math.ceil(math.log2(p))     # up and down both trees at once
        assert small.latency < cost("allreduce", "ring", p, 8, M).latency or p < 8
        assert ring.rounds == 2 * (p - 1)


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_sampled_ranks_give_the_exact_cost(collective, algorithm):
    """Above EXACT_LIMIT the model costs sample_ranks() (every rank if the sample leaves a round
    uncovered, as in a chain); at p <= 256 that policy, forced with sample=True, equals every rank."""
    for size, per_node in ((64, None), (96, 6), (127, 4), (200, None), (256, 8)):
        m = M.with_nodes(per_node) if per_node is None else Machine(2e-6, 1e-9, 3e-10, 5e-7, 2e-10, per_node)
        for n in (8, size * 64):
            ps = params(collective, algorithm, size, n)
            exact = cost(collective, algorithm, size, n, m, **ps)
            sampled = cost(collective, algorithm, size, n, m, sample=True, **ps)
            assert sampled.latency == pytest.approx(exact.latency, rel=1e-9), (size, n)
            if n % size == 0:   # even blocks: every term exact
                assert sampled.time == pytest.approx(exact.time, rel=1e-9), (size, n)
            else:               # uneven blocks: the sample may miss the one-byte-larger blocks of a round
                assert 0 <= exact.time - sampled.time <= exact.rounds * 4 * max(m.beta, m.gamma), (size, n)


ROOTED = [(c, a) for c, a in CASES if "root" in registry.get(c, a).params]


@pytest.mark.parametrize("collective,algorithm", ROOTED)
def test_sample_follows_the_root(collective, algorithm):
    """Rooted algorithms number ranks from the root: the sample is rotated with it."""
    size, root, n = 200, 77, 200 * 64
    ps = {**params(collective, algorithm, size, n), "root": root}
    exact = cost(collective, algorithm, size, n, M, **ps)
    sampled = cost(collective, algorithm, size, n, M, sample=True, **ps)
    assert sampled.time == pytest.approx(exact.time, rel=1e-9)
    assert root in sample_ranks(size, None, root) and (root - 1) % size in sample_ranks(size, None, root)


def test_sample_is_used_unless_a_round_is_left_uncovered():
    assert cost("allreduce", "rabenseifner", 300, 8, M).sampled          # every rank acts in every round
    assert not cost("allreduce", "ring", 300, 8, M).sampled              # rotating: exact from rank 0
    if "pipelined_chain" in registry.algorithms("bcast"):                 # round t is one rank's alone
        assert not cost("bcast", "pipelined_chain", 300, 8, M, root=0, segments=1).sampled


def _published(p):
    nodes = p // 6
    return 0.9e-6 * 2 * (p - 1), (68 + 14.5 * math.log2(nodes)) * 1e-6


def test_nccl_summit_preset_reproduces_the_published_8_byte_allreduce():
    """Ring within 15 %, double binary tree within 25 % (NCCL 2.4's published figures), 96 .. 24,576 ranks."""
    points = {96: (179e-6, 128e-6), 24576: (44.4e-3, 247e-6)}
    for p in (96, 384, 1536, 6144, 24576):
        ring_pub, tree_pub = points.get(p, _published(p))
        ring = cost("allreduce", "ring", p, 8, NCCL_SUMMIT).time
        tree = cost("allreduce", "double_binary_tree", p, 8, NCCL_SUMMIT, segments=1).time
        assert abs(ring / ring_pub - 1) < 0.15, (p, ring)
        assert abs(tree / tree_pub - 1) < 0.25, (p, tree)


def test_model_command_json_and_table(capsys):
    argv = ["model", "allreduce", "-p", "96", "--bytes", "8", "--preset", "nccl-summit"]
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == set(registry.algorithms("allreduce"))
    assert data["double_binary_tree"] < data["ring"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "lower bound" in out and "auto chooses:" in out
    assert main(["model", "allreduce", "-p", "8", "--bytes", "64", "--alpha", "1e-6", "--beta", "1e-9",
                 "--gamma", "1e-10", "--algorithms", "ring,binomial", "--ranks-per-node", "4", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"ring", "binomial"}


def test_ranks_per_node_uses_intra_constants():
    m = Machine(alpha=10e-6, beta=0.0, gamma=0.0, alpha_intra=1e-6, beta_intra=0.0)
    assert cost("allreduce", "ring", 8, 8, m).latency == pytest.approx(14 * 10e-6)
    assert cost("allreduce", "ring", 8, 8, m.with_nodes(8)).latency == pytest.approx(14 * 1e-6)
    assert cost("allreduce", "ring", 8, 8, m.with_nodes(4)).latency == pytest.approx(14 * 10e-6)


def test_local_preset_reads_the_calibration_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MPICOLL_CALIBRATION", str(tmp_path / "none.json"))
    assert preset("local").name == "local (default)"
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"alpha": 3e-6, "beta": 2e-10, "gamma": 1e-10}))
    monkeypatch.setenv("MPICOLL_CALIBRATION", str(path))
    assert preset("local").alpha == 3e-6
    with pytest.raises(ValueError, match="unknown preset"):
        preset("summit2")


# ---- draw -------------------------------------------------------------------------------------

def test_draw_writes_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib")
    png, svg = tmp_path / "ring.png", tmp_path / "tree.svg"
    assert main(["draw", "allreduce", "ring", "-p", "4", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["draw", "allreduce", "double_binary_tree", "-p", "8", "-o", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()[:500]
    assert main(["draw", "allreduce", "ring", "-p", "4", "-o", str(tmp_path / "x.gif")]) == 2


def test_draw_without_matplotlib_says_what_to_install(tmp_path, monkeypatch, capsys):
    import builtins

    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    assert main(["draw", "allreduce", "ring", "-p", "4", "-o", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err
    # the extra to install, and the install line naming the Python that runs mpicoll (not a bare pip)
    assert "[plot] extra" in err and f"python3 -m pip --python {sys.executable} install matplotlib" in err, err


def test_trace_ring_holds_the_textbook_states():
    from mpicoll.analysis.trace import holdings, trace

    tr = trace("allreduce", "ring", 4)
    assert tr.nrounds == 6
    after_rs = [holdings(tr.states[3][r], 4) for r in range(4)]  # after the reduce-scatter
    for r in range(4):
        assert len(after_rs[r][r]) == 4                           # block r complete at rank r
    assert all(len(b) == 4 for r in range(4) for b in holdings(tr.states[6][r], 4))


def test_parallel_in_place_check_reports_the_childs_failure(monkeypatch, capsys, in_place_hazard_build):
    """From PARALLEL_FROM ranks on the in-place form runs in a forked child; its failure must surface."""
    from mpicoll.tools import commands as tools

    build = in_place_hazard_build
    registry.register("allreduce", "broken_in_place", keeps_order=False, scratch=TEST_SCRATCH)(build)
    registry._schedule.cache_clear()
    monkeypatch.setattr(tools, "PARALLEL_FROM", 2)
    try:
        assert main(["verify", "allreduce", "broken_in_place", "-p", "2"]) == 1
        assert "in place" in capsys.readouterr().err
    finally:
        registry._REGISTRY["allreduce"].pop("broken_in_place", None)
        registry._schedule.cache_clear()


def test_model_reads_byte_suffixes_and_costs_every_collective(capsys):
    for coll in registry.collectives():
        assert main(["model", coll, "-p", "13", "--bytes", "1M", "--json"]) == 0, coll
        data = json.loads(capsys.readouterr().out)
        assert set(data) == set(registry.algorithms(coll)) and all(t > 0 for t in data.values()), coll
    with pytest.raises(SystemExit) as exc:             # argparse: usage error, status 2
        main(["model", "bcast", "-p", "4", "--bytes", "1X"])
    assert exc.value.code == 2 and "--bytes" in capsys.readouterr().err


def test_trace_latest_shows_where_alltoall_blocks_come_from():
    from mpicoll.analysis.trace import latest, trace

    size = 5
    tr = trace("alltoall", "bruck", size)
    for r in range(size):
        assert latest(tr.states[0][r], size) == [(j, (r,)) for j in range(size)]    # own send buffer
        assert latest(tr.states[-1][r], size) == [(r, (j,)) for j in range(size)]   # block for r from j
