"""Collectives on GPU buffers: how a call on device arrays moves its data.

A call whose buffers live on a GPU (CuPy, or anything exposing
``__cuda_array_interface__`` or a CUDA DLPack device) gets a plan with a
:class:`~mpicoll.gpu.call.DeviceCall`, which runs it with one of three
transports, chosen per call (``MPICOLL_GPU_TRANSPORT``, see
:mod:`mpicoll.gpu.transport`):

- ``ipc`` (:mod:`~mpicoll.gpu.ipc`): ranks on one node read each other's
  device memory through CUDA IPC handles, exchanged once per plan;
- ``staged`` (:mod:`~mpicoll.gpu.staged`): pinned host mirrors, allocated
  once per plan, with copies on their own stream overlapping the messages;
- ``cuda-aware``: the device buffers go to a CUDA-aware MPI as they are.

Every transport is written against the small interface of
:mod:`~mpicoll.data.device`, whose host stand-in runs them without a GPU.
"""

from __future__ import annotations

from typing import Any

from mpicoll.data.device import device_of, on_device

__all__ = ["on_device", "device_of", "device_for", "transport_of"]


def device_for(arrays: dict[str, Any]) -> Any:
    """The device of the first device array among ``arrays`` (None when all are host arrays)."""
    for arr in arrays.values():
        device = device_of(arr)
        if device is not None:
            return device
    return None


def transport_of(plan: Any) -> str | None:
    """The transports a plan's device buffers use so far, as ``MPICOLL_DEBUG=2`` reports them (None: host).

    E.g. ``"ipc (every rank on this node)"``, or ``"blocking: ipc (...); request: staged (...)"``.
    """
    call = getattr(plan, "device", None)
    if call is None:
        return None
    parts = [(path, choice) for path, choice in (("blocking", call.choice), ("request", call.async_choice))
             if choice is not None]
    if not parts:
        return "not chosen yet (chosen when the call first runs)"
    if len(parts) == 1:
        return f"{parts[0][1].name} ({parts[0][1].reason})"
    return "; ".join(f"{path}: {choice.name} ({choice.reason})" for path, choice in parts)

