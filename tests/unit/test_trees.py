"""The double binary tree, checked against its invariants (NCCL's two-tree construction)."""

from __future__ import annotations

import pytest

from mpicoll.families.trees import btree, tree


def test_btree_small_cases():
    assert btree(1, 0) == (-1, [])
    assert btree(2, 0) == (-1, [1]) and btree(2, 1) == (0, [])
    assert btree(8, 0) == (-1, [4])
    assert btree(8, 4) == (0, [2, 6])
    assert btree(8, 6) == (4, [5, 7])
    assert btree(7, 6) == (4, [5])


@pytest.mark.parametrize("n", list(range(2, 300)) + [511, 512, 513, 1000, 1024, 2047, 2048])
def test_double_binary_tree_invariants(n):
    t0, t1 = tree(n, 0), tree(n, 1)
    height = (n - 1).bit_length()
    for t in (t0, t1):
        assert max(t.depth) == height                              # both trees have height ceil(lg n)
        assert sorted(t.parent).count(-1) == 1                     # one root
        for v in range(n):                                         # parent/children agree
            for c in t.children[v]:
                assert t.parent[c] == v
    for v in range(n):                                             # at most 2 children over both trees
        assert len(t0.children[v]) + len(t1.children[v]) <= 2
    interior_in_both = [v for v in range(n) if t0.children[v] and t1.children[v]]
    if n % 2 == 0:
        assert interior_in_both == []
    else:
        assert interior_in_both == [0] and len(t0.children[0]) == len(t1.children[0]) == 1
