"""Buffer parsing and local reduction kernels, without MPI traffic."""

from __future__ import annotations

import array

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.analysis.simulate import simulate
from mpicoll.data.buffers import is_in_place, parse
from mpicoll.data.kernels import predefined
from mpicoll.data.ops import check_op, reducer
from mpicoll.selection.choose import choose, forced_by_environment
from mpicoll.selection.segments import segments_for


class TestParse:
    def test_plain_array(self):
        b = parse(np.arange(6.0), "sendbuf")
        assert b.count == 6 and b.dtype == np.float64 and b.writable

    def test_datatype_wins(self):
        b = parse([np.zeros(4), MPI.FLOAT], "recvbuf")
        assert b.dtype == np.float32 and b.count == 8

    def test_count_and_displacement(self):
        x = np.arange(10.0)
        assert parse([x, 3, MPI.DOUBLE], "b").array.tolist() == [0, 1, 2]
        assert parse([x, (3, 2), MPI.DOUBLE], "b").array.tolist() == [2, 3, 4]
        assert parse((x, 3, 4, "d"), "b").array.tolist() == [4, 5, 6]
        assert parse([x, np.int32(2), MPI.DOUBLE], "b").count == 2

    def test_contiguous_datatype(self):
        b = parse([np.arange(9, dtype=np.int32), MPI.INT.Create_contiguous(3)], "b")
        assert b.count == 9 and b.dtype == np.int32

    def test_bytes_like(self):
        assert parse(bytearray(8), "b").dtype == np.uint8
        assert parse(array.array("d", [1, 2]), "b").dtype == np.float64
        assert not parse(b"abc", "b").writable

    def test_errors(self):
        with pytest.raises(ValueError, match="needs 12 elements"):
            parse([np.zeros(10), 3, 9, MPI.DOUBLE], "recvbuf")
        with pytest.raises(ValueError, match="read-only"):
            parse(b"abc", "recvbuf", writable=True)
        with pytest.raises(TypeError, match="expected a buffer"):
            parse(object(), "sendbuf")
        with pytest.raises(ValueError, match="contiguous"):
            parse(np.zeros(10)[::2], "sendbuf")
        with pytest.raises(ValueError, match=">= 0"):
            parse([np.zeros(4), -1, MPI.DOUBLE], "sendbuf")

    def test_in_place_markers(self):
        assert is_in_place(None) and is_in_place(MPI.IN_PLACE) and not is_in_place(np.zeros(1))


class TestOps:
    def run(self, op, left, right):
        out = np.empty_like(right)
        reducer(op, right.dtype).reduce(out, left, right)
        return out

    def test_predefined(self):
        a, b = np.array([1, 0, 3, 6]), np.array([2, 0, 0, 5])
        assert self.run(MPI.SUM, a, b).tolist() == [3, 0, 3, 11]
        assert self.run(MPI.LAND, a, b).tolist() == [1, 0, 0, 1]
        assert self.run(MPI.LXOR, a, b).tolist() == [0, 0, 1, 0]
        assert self.run(MPI.BXOR, a, b).tolist() == [3, 0, 3, 3]

    def test_half_precision(self):
        a = np.array([1.5, 2.0], np.float16)
        assert self.run(MPI.SUM, a, a).tolist() == [3.0, 4.0]
        ml_dtypes = pytest.importorskip("ml_dtypes")
        bf = np.array([1.5, 2.0], ml_dtypes.bfloat16)
        assert self.run(MPI.MAX, bf, bf * 2).astype(np.float32).tolist() == [3.0, 4.0]

    def test_minloc_ties_take_the_smaller_index(self):
        dt = np.dtype([("f0", "f8"), ("f1", "i4")])
        a = np.array([(1.0, 3), (2.0, 0), (5.0, 9)], dt)
        b = np.array([(1.0, 1), (1.0, 4), (5.0, 2)], dt)
        out = self.run(MPI.MINLOC, a, b)
        assert out.tolist() == [(1.0, 1), (1.0, 4), (5.0, 2)]
        assert self.run(MPI.MAXLOC, a, b).tolist() == [(1.0, 1), (2.0, 0), (5.0, 2)]

    def test_minloc_maxloc_read_the_pair_by_position(self):
        # value "b" first, index "a" second: neither f0/f1 nor alphabetical
        dt = np.dtype([("b", "f8"), ("a", "i4")])
        a = np.array([(1.0, 3), (2.0, 0), (5.0, 9)], dt)
        b = np.array([(1.0, 1), (1.0, 4), (5.0, 2)], dt)
        assert self.run(MPI.MINLOC, a, b).tolist() == [(1.0, 1), (1.0, 4), (5.0, 2)]
        assert self.run(MPI.MAXLOC, a, b).tolist() == [(1.0, 1), (2.0, 0), (5.0, 2)]
        with pytest.raises(TypeError, match="MAXLOC needs a pair"):
            predefined("MAXLOC", np.dtype(np.float64))

    def test_a_raising_user_op_raises_in_the_simulator(self):
        # one process: nothing waits, so the error is raised, not turned into an abort
        def fail(a, b):
            raise ZeroDivisionError("in the op")

        with pytest.raises(ZeroDivisionError, match="in the op"):
            simulate("allreduce", "ring", [np.ones(4), np.ones(4)], op=mpicoll.Op(fail, commute=True))

    def test_a_raising_user_op_ends_the_job_in_the_runtime(self, monkeypatch):
        # in a collective, a rank that raised would leave its peers waiting: the kernel calls the abort
        from mpicoll.data import ops

        ended = []
        monkeypatch.setattr(ops, "abort_for_user_op", lambda op, exc: ended.append((op, exc)))

        def fail(a, b):
            raise ZeroDivisionError("in the op")

        op = mpicoll.Op(fail, commute=True)
        reducer(op, np.dtype(np.float64)).reduce(np.zeros(2), np.ones(2), np.ones(2))
        assert len(ended) == 1 and ended[0][0] is op and isinstance(ended[0][1], ZeroDivisionError)

    def test_user_op_in_place_aliasing(self):
        def sub(a, b):  # b = a - b: not commutative
            b[...] = a - b

        op = mpicoll.Op(sub)
        k = reducer(op, np.dtype(np.float64)).reduce
        a, b = np.array([5.0]), np.array([2.0])
        k(a, a, b)            # out is left
        assert a[0] == 3.0
        a, b = np.array([5.0]), np.array([2.0])
        k(b, a, b)            # out is right
        assert b[0] == 3.0

    def test_op_dtype_rules(self):
        with pytest.raises(TypeError, match="BAND"):
            check_op(MPI.BAND, np.dtype(np.float64))
        with pytest.raises(TypeError, match="MIN"):
            check_op(MPI.MIN, np.dtype(np.complex128))
        with pytest.raises(TypeError, match="MINLOC"):
            check_op(MPI.MINLOC, np.dtype(np.float64))
        check_op(MPI.BAND, np.dtype(np.uint8))
        check_op(MPI.SUM, np.dtype(np.float16))

    def test_checks_and_kernels_remembered_within_bounds(self, monkeypatch):
        # what passed is remembered (and only that: a refused pair is refused every time), and both
        # memos stay bounded however many (op, dtype) pairs a program uses
        from mpicoll.data import ops

        monkeypatch.setattr(ops, "_MEMO_LIMIT", 8)
        for _ in range(2):
            with pytest.raises(TypeError, match="BAND"):
                check_op(MPI.BAND, np.dtype(np.float64))
        assert ("BAND", np.dtype(np.float64)) not in ops._CHECKED
        assert reducer(MPI.SUM, np.dtype(np.float32)) is reducer(MPI.SUM, np.dtype(np.float32))
        for op in (MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN):
            for dtype in map(np.dtype, ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8")):
                kernel = reducer(op, dtype)
                assert len(ops._CHECKED) <= 8 and len(ops._KERNELS) <= 8
        x, y, out = np.arange(4.0), np.ones(4), np.zeros(4)
        reducer(MPI.SUM, np.dtype(np.float64)).reduce(out, x, y)
        assert out.tolist() == [1, 2, 3, 4] and kernel is reducer(MPI.MIN, np.dtype("f8"))

    def test_op_name_by_handle(self):
        from mpicoll.data.ops import op_name

        assert op_name(MPI.SUM) == "SUM" and op_name(MPI.Op.f2py(MPI.MAX.py2f())) == "MAX"
        assert op_name(MPI.OP_NULL) == "OP_NULL"
        user = MPI.Op.Create(lambda a, b, t: None, commute=True)
        try:
            assert op_name(user) == "user"
        finally:
            user.Free()
        assert op_name(mpicoll.Op(lambda a, b: None)) == "user"


class TestSelection:
    def test_environment(self, monkeypatch):
        monkeypatch.setenv("MPICOLL_ALGO", "bcast=binomial, allreduce=Ring")
        assert forced_by_environment("allreduce") == "ring"
        assert choose("allreduce", "auto", size=3, nbytes=10**6, count=10**5)[0] == "ring"
        assert choose("allreduce", "linear", size=3, nbytes=10**6, count=10**5)[0] == "linear"
        monkeypatch.setenv("MPICOLL_ALGO", "allreduce")
        with pytest.raises(ValueError, match="MPICOLL_ALGO"):
            forced_by_environment("allreduce")

    def test_environment_read_on_every_call(self, monkeypatch):
        # the parsed value is remembered per text: a change of the variable takes effect at once
        monkeypatch.setenv("MPICOLL_ALGO", "allreduce=ring")
        assert forced_by_environment("allreduce") == "ring" and forced_by_environment("bcast") is None
        monkeypatch.setenv("MPICOLL_ALGO", "bcast=binomial,allreduce=linear")
        assert forced_by_environment("allreduce") == "linear" and forced_by_environment("bcast") == "binomial"
        monkeypatch.delenv("MPICOLL_ALGO")
        assert forced_by_environment("allreduce") is None
        monkeypatch.setenv("MPICOLL_ALGO", "allreduce=ring,oops")   # malformed anywhere: refused for every call
        for collective in ("allreduce", "bcast"):
            with pytest.raises(ValueError, match="oops"):
                forced_by_environment(collective)

    @pytest.mark.parametrize("size", range(1, 70))
    def test_auto_keeps_order_for_non_commutative_ops(self, size):
        from mpicoll.families import registry

        for nbytes in (8, 10**4, 10**6, 10**8):
            name, _ = choose("allreduce", "auto", size=size, nbytes=nbytes, count=nbytes // 8, commutative=False)
            assert registry.get("allreduce", name).keeps_order(size)

    def test_segments(self):
        assert segments_for(0) == 1 and segments_for(256 * 1024) == 1
        assert segments_for(64 << 20, pieces=2) == 64
