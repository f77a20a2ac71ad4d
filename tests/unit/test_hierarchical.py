"""Node layouts, the hierarchical schedules' structure, the node-aware cost model and the test bed's parts.

The symbolic proofs and simulations of the hierarchical algorithms run with all
others in test_schedules.py and test_rooted_schedules.py (with node layouts).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from mpicoll import config
from mpicoll.analysis.cost import Machine, cost
from mpicoll.analysis.simulate import simulate
from mpicoll.analysis.symbolic import verify
from mpicoll.families import registry
from mpicoll.ir import nodes
from mpicoll.selection import hierarchy
from mpicoll.tools import testbed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HIER = [(c, "hierarchical") for c in ("allreduce", "bcast", "reduce", "allgather", "allgatherv", "barrier")]
# a test-bed-like machine: 1 Gbit/s links shared per node, shared memory inside
TESTBED = Machine(alpha=60e-6, beta=1 / 125e6, gamma=1 / 3e9, alpha_intra=3e-6, beta_intra=1 / 3e9,
                  ranks_per_node=2, link_per_node=True)


class TestLayouts:
    def test_forms(self):
        assert nodes.groups(5, None) == ((0, 1, 2, 3, 4),)
        assert nodes.groups(5, 3) == ((0, 1, 2), (3, 4))
        assert nodes.groups(5, ("b", "a", "b", "a", "c")) == ((0, 2), (1, 3), (4,))
        assert nodes.node_of(5, ("b", "a", "b", "a", "c")) == (0, 1, 0, 1, 2)
        assert nodes.block_size(6, (0, 0, 0, 1, 1, 1)) == 3 and nodes.block_size(4, (0, 1, 0, 1)) is None
        assert nodes.is_multi_node(4, 2) and not nodes.is_multi_node(4, None) and not nodes.is_multi_node(4, 1)

    @pytest.mark.parametrize("bad,exc", [(0, ValueError), ((0, 1), ValueError), ("2", TypeError)])
    def test_bad_layouts(self, bad, exc):
        with pytest.raises(exc, match="nodes"):
            nodes.groups(3, bad)

    def test_environment(self, monkeypatch):
        monkeypatch.setenv("MPICOLL_NODE_SIZE", "3")
        assert config.current().node_size == 3
        for bad in ("0", "x", "-2"):
            monkeypatch.setenv("MPICOLL_NODE_SIZE", bad)
            with pytest.raises(ValueError, match="MPICOLL_NODE_SIZE"):
                config.current()


@pytest.mark.parametrize("collective,algorithm", HIER)
@pytest.mark.parametrize("size", [5, 7, 12])
def test_uneven_and_scattered_layouts_prove(collective, algorithm, size):
    """3 + 2 style layouts, round-robin node ids and one-rank nodes, every root."""
    alg = registry.get(collective, algorithm)
    layouts = [3, 4, tuple(r % 3 for r in range(size)), tuple((0,) * (size - 1) + (1,)), 1]
    for layout in layouts:
        for root in (range(size) if "root" in alg.params else [None]):
            params = {"nodes": layout, **({} if root is None else {"root": root})}
            verify(collective, algorithm, size, **params)


def _heard(collective: str, size: int, layout) -> list[set[int]]:
    """Ranks whose arrival each rank has heard of (directly or not) when its schedule ends."""
    sets = registry.schedules(collective, "hierarchical", size, nodes=layout).schedules
    know = [{r} for r in range(size)]
    for t in range(max(len(s.rounds) for s in sets)):
        sent = {}
        for r, s in enumerate(sets):
            if t < len(s.rounds):
                for x in s.rounds[t].sends:
                    sent.setdefault((r, x.peer), set()).update(know[r])
        for r, s in enumerate(sets):
            if t < len(s.rounds):
                for x in s.rounds[t].recvs:
                    know[r] |= sent[(x.peer, r)]
    return know


@pytest.mark.parametrize("size,layout", [(5, 3), (8, 2), (7, (0, 1, 2, 0, 1, 2, 0)), (6, None), (4, 1)])
def test_barrier_releases_no_rank_before_all_arrived(size, layout):
    assert all(k == set(range(size)) for k in _heard("barrier", size, layout))


def test_simulated_hierarchical_allreduce_on_uneven_nodes():
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-9, 9, 37).astype(np.float64) for _ in range(5)]
    for layout in (3, (0, 1, 0, 1, 1), 2):
        for out in simulate("allreduce", "hierarchical", inputs, nodes=layout):
            np.testing.assert_array_equal(out, np.sum(inputs, axis=0))


def _inter_node_bytes(collective: str, algorithm: str, size: int, nbytes: int, per_node: int) -> int:
    """Bytes all ranks send to other nodes, from the schedules and an even layout of ``nbytes``."""
    from mpicoll.ir.layout import Layout

    params = {"nodes": per_node} if "nodes" in registry.get(collective, algorithm).params else {}
    total = 0
    for s in registry.schedules(collective, algorithm, size, **params):
        lay = Layout.even(nbytes, s.nblocks)
        for rnd in s.rounds:
            crossing = [x for x in rnd.sends if x.peer // per_node != s.rank // per_node]
            total += sum(lay.count(x.block.lo, x.block.hi) for x in crossing)
    return total


@pytest.mark.parametrize("size,per_node", [(4, 2), (8, 4), (6, 3), (8, 2)])
def test_hierarchical_allreduce_sends_fewer_bytes_between_nodes_than_ring(size, per_node):
    n = 16 << 20
    hier = _inter_node_bytes("allreduce", "hierarchical", size, n, per_node)
    ring = _inter_node_bytes("allreduce", "ring", size, n, per_node)
    nnodes = size // per_node
    assert hier == 2 * (nnodes - 1) * n   # 2 (L-1)/L n out of each of the L nodes
    assert hier <= ring


class TestCostModel:
    def test_a_shared_node_link_slows_parallel_inter_node_messages(self):
        alone = cost("allreduce", "hierarchical", 4, 16 << 20, replace(TESTBED, link_per_node=False))
        shared = cost("allreduce", "hierarchical", 4, 16 << 20, TESTBED)
        # in each of the 2 inter-node rounds both ranks of a node send a 4 MiB part: one link carries 8 MiB
        assert shared.bandwidth - alone.bandwidth == pytest.approx(2 * (4 << 20) / 125e6, rel=1e-6)

    def test_hierarchical_beats_ring_on_the_test_bed_model(self):
        ring = cost("allreduce", "ring", 4, 16 << 20, TESTBED).time
        hier = cost("allreduce", "hierarchical", 4, 16 << 20, TESTBED).time
        assert hier < 0.8 * ring

    def test_nodes_argument_builds_the_layout(self):
        m = Machine(alpha=1e-5, beta=1e-8, gamma=1e-10, alpha_intra=1e-6, beta_intra=1e-10)
        by_layout = cost("allreduce", "hierarchical", 6, 1 << 20, m, nodes=(0, 0, 0, 1, 1, 1)).time
        by_block = cost("allreduce", "hierarchical", 6, 1 << 20, m.with_nodes(3)).time
        assert by_layout == pytest.approx(by_block)

    def test_auto_prefers_hierarchical_only_where_the_model_says(self):
        assert hierarchy.prefer("allreduce", "ring", size=4, nbytes=16 << 20, nodes=2, constants=TESTBED) \
            == "hierarchical"
        assert hierarchy.prefer("allreduce", "ring", size=4, nbytes=16 << 20, nodes=None, constants=TESTBED) == "ring"
        assert hierarchy.prefer("allreduce", "ring", size=4, nbytes=16 << 20, nodes=2, constants=TESTBED,
                                commutative=False) == "ring"
        assert hierarchy.prefer("alltoall", "pairwise", size=4, nbytes=1 << 20, nodes=2, constants=TESTBED) \
            == "pairwise"

    def test_no_inter_node_constants_keeps_the_flat_choice(self, tmp_path, monkeypatch):
        monkeypatch.setenv("MPICOLL_CALIBRATION", str(tmp_path / "none.json"))
        assert hierarchy.machine(4, 2) is None
        assert hierarchy.prefer("allreduce", "ring", size=4, nbytes=16 << 20, nodes=2) == "ring"
        (tmp_path / "c.json").write_text('{"alpha": 6e-5, "beta": 8e-9, "gamma": 3e-10, "alpha_intra": 3e-6, '
                                         '"beta_intra": 3e-10, "link_per_node": true}')
        monkeypatch.setenv("MPICOLL_CALIBRATION", str(tmp_path / "c.json"))
        m = hierarchy.machine(4, 2)
        assert m is not None and m.link_per_node and m.ranks_per_node == 2
        assert hierarchy.prefer("allreduce", "ring", size=4, nbytes=(16 << 20) + 1, nodes=2) == "hierarchical"


class TestTestBedParts:
    def test_rates(self):
        assert testbed.parse_rate("1gbit") == 125e6 and testbed.parse_rate("100mbit") == 12.5e6
        assert testbed.parse_rate("10MBps") == 10e6
        for bad in ("fast", "1 gbit", "0gbit", "-1mbit"):
            with pytest.raises(ValueError, match="link-rate"):
                testbed.parse_rate(bad)

    def test_hosts_get_consecutive_ranks(self, tmp_path):
        bed = testbed.TestBed(2)
        bed.workdir = str(tmp_path)
        with open(bed.hostfile(5)) as fh:
            assert fh.read().split("\n")[:2] == ["10.77.0.1 slots=3", "10.77.0.2 slots=2"]

    @pytest.mark.parametrize("args,message", [
        (["--emulate-hosts", "0", "-n", "2", "x.py"], "1 .. 200"),
        (["--emulate-hosts", "two", "x.py"], "number of hosts"),
        (["--link-rate", "1gbit", "-n", "2", "x.py"], "needs --emulate-hosts"),
        (["--emulate-hosts", "2", "--link-rate", "fast", "x.py"], "link-rate"),
        (["--emulate-hosts", "2", "-n"], "needs a value"),
    ])
    def test_bad_options_are_refused_before_anything_is_made(self, args, message):
        proc = subprocess.run([sys.executable, "-m", "mpicoll.launch", *args], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr

    def test_available_says_why(self):
        mode, reason = testbed.available()
        assert mode in ("root", "userns", None) and reason
