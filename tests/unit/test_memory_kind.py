"""Where a ``__cuda_array_interface__`` object's memory lives (mpicoll.data.memory.cai_on_device)."""

from __future__ import annotations

import numpy as np

from mpicoll.data import memory


def _cai_object(module: str, pointer: int, size: int) -> object:
    """An object of a class defined in ``module`` exposing a CUDA array interface of ``size`` float32s."""
    cls = type("Array", (), {"__module__": module, "__cuda_array_interface__": {
        "version": 3, "shape": (size,), "typestr": "<f4", "data": (pointer, False), "strides": None}})
    return cls()


def test_empty_gpu_library_array_is_a_device_array():
    # CuPy and Numba give an empty array a null pointer: it still belongs with the call's other device buffers
    # (found on a GPU: mpi4py's Gatherv test sends 0 elements from a CuPy array to a CuPy receive buffer)
    assert memory.cai_on_device(_cai_object("cupy._core.core", 0, 0))
    assert memory.cai_on_device(_cai_object("numba.cuda.cudadrv.devicearray", 0, 0))


def test_empty_host_array_behind_the_interface_is_host_memory():
    # mpi4py's fake GPU arrays (host memory behind the interface) stay host buffers, empty ones included
    assert not memory.cai_on_device(_cai_object("arrayimpl", 0, 0))


def test_host_pointer_is_host_memory():
    host = np.zeros(4, np.float32)
    assert not memory.cai_on_device(_cai_object("arrayimpl", host.ctypes.data, 4))
