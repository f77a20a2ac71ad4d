"""Messages described by an address and a datatype may reach past the Python object that carries the address.

MPI and mpi4py take ``[MPI.memory.fromaddress(ptr, n * itemsize), n, vector.Create_resized(0, stride)]``
(the datatype's span ends past the memory object, not past the tensor's storage); so does mpicoll, which
checks a span only against memory it knows to be there (the array a view lies in, a bytes-like object) and
defers to MPI where it cannot know (issue 24: the root alone raised CountError and its peer waited forever).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll.data import datatypes
from mpicoll.data.buffers import parse, parse_v
from mpicoll.data.memory import dlpack_host_view, known_bounds


def _column_block(rows: int = 4, cols: int = 6, width: int = 2):
    """A row-major tensor, and its first ``width`` columns as an address + count + resized vector."""
    tensor = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    vector = MPI.DOUBLE.Create_vector(1, width, width).Create_resized(0, cols * 8).Commit()
    memory = MPI.memory.fromaddress(tensor.ctypes.data, rows * width * 8)    # numel * itemsize
    return tensor, [memory, rows, vector], vector


def test_memory_from_address_with_a_resized_vector_is_taken():
    tensor, spec, vector = _column_block()
    with datatypes.packing():
        buf = parse(spec, "sendbuf")
    assert np.array_equal(buf.array, tensor[:, :2].reshape(-1))
    vector.Free()


def test_a_receive_past_the_memory_object_unpacks_into_the_tensor():
    tensor, spec, vector = _column_block()
    with datatypes.packing() as packed:
        buf = parse(spec, "recvbuf", writable=True)
    buf.array[:] = -np.arange(8.0)
    for unpack in packed.unpack:
        unpack()
    assert np.array_equal(tensor[:, :2].reshape(-1), -np.arange(8.0))
    assert np.array_equal(tensor[:, 2:], np.arange(24.0).reshape(4, 6)[:, 2:])
    vector.Free()


def test_dense_count_past_a_view_inside_its_array():
    whole = np.arange(10.0)
    buf = parse([whole[:2], 6, MPI.DOUBLE], "sendbuf")
    assert np.array_equal(buf.array, np.arange(6.0))
    vbuf = parse_v([whole[:2], [2, 2], [0, 4], MPI.DOUBLE], "recvbuf", 2, writable=True)
    assert vbuf.array.shape[0] >= 6 and vbuf.writable


@pytest.mark.parametrize("spec, needs", [
    ([np.zeros(10), 3, 9, MPI.DOUBLE], "needs 12 elements"),
    ([np.zeros(10)[:4], 3, 9, MPI.DOUBLE], "the memory it lies in, 10"),
])
def test_past_memory_known_to_end_is_refused(spec, needs):
    with pytest.raises(ValueError, match=needs) as info:
        parse(spec, "recvbuf")
    assert info.value.Get_error_class() == MPI.ERR_COUNT


def test_a_datatype_past_an_owned_array_is_refused():
    vector = MPI.DOUBLE.Create_vector(1, 2, 2).Create_resized(0, 48).Commit()
    with datatypes.packing(), pytest.raises(ValueError, match="span bytes") as info:
        parse([np.zeros(8), 4, vector], "sendbuf")
    assert info.value.Get_error_class() == MPI.ERR_COUNT
    vector.Free()


def test_known_bounds():
    whole = np.zeros(10)
    assert known_bounds(whole[2:5]) == (16, 64)
    assert known_bounds(np.frombuffer(bytearray(12), np.uint8)[4:]) == (4, 8)
    assert known_bounds(np.asarray(memoryview(MPI.buffer.allocate(16)))) == (0, 16)
    assert known_bounds(np.asarray(memoryview(MPI.memory.fromaddress(whole.ctypes.data, 8)))) is None
    assert known_bounds(dlpack_host_view(whole)) is None     # a DLPack tensor's storage is not known here
