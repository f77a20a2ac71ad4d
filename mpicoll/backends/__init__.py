"""Array namespaces and GPU buffers.

Buffers on the GPU (CuPy, or anything exposing ``__cuda_array_interface__`` or a
CUDA DLPack device) are staged through host memory: the call copies the send
data to the host (which synchronizes the device first, so MPI never reads a
buffer a kernel is still writing), runs the collective there, and copies the
result back.  This is always correct, whether or not the MPI library is
CUDA-aware; direct device-to-device transfers are a later optimization.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["on_device", "to_host", "to_device"]


def on_device(array: Any) -> bool:
    """True for a CuPy (GPU) array."""
    return type(array).__module__.split(".")[0] == "cupy"


def to_host(array: Any) -> np.ndarray:
    """A NumPy copy of a device array (synchronizes the current stream)."""
    return array.get()


def to_device(host: np.ndarray, device_array: Any) -> None:
    """Copy ``host`` into ``device_array`` and wait until it is there."""
    device_array.set(host)
    import cupy  # noqa: PLC0415

    cupy.cuda.get_current_stream().synchronize()
