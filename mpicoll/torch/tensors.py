"""Torch tensors as NumPy arrays that mpicoll can send and reduce, without copies where possible.

Data movement (broadcast, gather, all-to-all, send, ...) sees every tensor as
bytes, so every dtype moves, float8 and complex32 included.  Reductions see a
typed view: bfloat16 becomes an ``ml_dtypes.bfloat16`` array (a view of the
same memory), float16 NumPy's own, so both are reduced as themselves, never as
bytes.  A tensor that is not contiguous (a strided view, a transposed matrix)
is staged: read from a contiguous copy, and written back after the call.
:class:`ArrayCache` keeps the NumPy views of small tensors from call to call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["ArrayCache", "Staged", "bytes_of", "check_tensor", "reducible", "stage_in", "stage_out", "typed_array"]

# dtypes whose tensor.numpy() is the matching NumPy array (shared memory)
_NUMPY_DTYPES = {
    torch.float64, torch.float32, torch.float16, torch.complex64, torch.complex128, torch.bool,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
}
# float8 and other formats that mpicoll may move but must not reduce: no arithmetic is defined for them
# in torch's collectives (Gloo and NCCL refuse them too)
_MOVE_ONLY = {name for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                "float8_e8m0fnu", "float4_e2m1fn_x2", "complex32") if hasattr(torch, name)}


def check_tensor(t: torch.Tensor, what: str = "tensor", sparse_ok: bool = False) -> None:
    """Raise a clear error for a tensor the backend cannot take (not CPU; not dense, unless ``sparse_ok``
    and sparse COO).

    Raises
    ------
    TypeError
        ``t`` is not a tensor.
    ValueError
        ``t`` lives on a device other than the CPU, or is sparse or quantized.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mpicoll backend: {what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"mpicoll backend: {what} is on {t.device}; the backend takes CPU tensors only "
                         "(use 'cpu:mpicoll,cuda:nccl' for GPU tensors)")
    if sparse_ok and t.layout == torch.sparse_coo:
        return
    if t.layout != torch.strided or t.is_quantized:
        raise ValueError(f"mpicoll backend: {what} has layout {t.layout}; only dense tensors are supported")


def reducible(dtype: torch.dtype) -> bool:
    """Whether mpicoll can reduce tensors of ``dtype`` as themselves."""
    return dtype in _NUMPY_DTYPES or dtype == torch.bfloat16


def move_only_name(dtype: torch.dtype) -> str | None:
    """The name of ``dtype`` if it may be moved but never reduced (float8, complex32), else None."""
    name = str(dtype).removeprefix("torch.")
    return name if name in _MOVE_ONLY else None


def _plain(t: torch.Tensor) -> bool:
    """Whether ``t`` can be shared with NumPy as it is: contiguous, no lazy conjugate or negation."""
    return t.is_contiguous() and not t.is_conj() and not t.is_neg()


def bytes_of(t: torch.Tensor) -> np.ndarray:
    """A uint8 NumPy view of a contiguous tensor's memory (any dtype)."""
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return np.empty(0, dtype=np.uint8)
    return flat.view(torch.uint8).numpy()


def typed_array(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of a contiguous tensor with its own element type (bfloat16 through ml_dtypes)."""
    flat = t.detach().reshape(-1)
    if flat.dtype == torch.bfloat16:
        import ml_dtypes  # noqa: PLC0415 - only where bfloat16 is reduced

        return flat.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return flat.numpy()


def stage_in(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when NumPy can share it, else a contiguous copy (for data that is only read)."""
    return t if _plain(t) else t.resolve_conj().resolve_neg().contiguous()


@dataclass
class Staged:
    """An output tensor and the contiguous buffer the call writes; :meth:`finish` copies back if they differ."""

    target: torch.Tensor
    buffer: torch.Tensor
    after: list[Callable[[], None]] = field(default_factory=list)

    def finish(self) -> None:
        """Copy the buffer into the target where the call could not write the target directly."""
        if self.buffer is not self.target:
            with torch.no_grad():
                self.target.copy_(self.buffer.view(self.target.shape))


def stage_out(t: torch.Tensor, keep: bool = True) -> Staged:
    """Stage an output (or in-out) tensor: itself when contiguous, else a contiguous copy.

    ``keep`` copies the current values into the buffer (in-out tensors); a pure output skips the copy.
    """
    if _plain(t):
        return Staged(t, t)
    if keep:
        return Staged(t, t.resolve_conj().resolve_neg().contiguous())
    return Staged(t, torch.empty(t.shape, dtype=t.dtype))


class ArrayCache:
    """NumPy views of small plain tensors, kept from call to call (making a view costs more than a small call).

    A view is found again by the tensor's address, element count and dtype.  It
    holds its tensor's memory, so no other tensor can be given that address while
    it is cached: a tensor with the same address, count and dtype is a view of
    the same bytes, if it is contiguous and not a lazy negation (checked on every
    call; a lazy conjugate has a complex dtype, never cached).  Tensors of at
    most :attr:`MAX_BYTES` are cached, the last :attr:`ENTRIES` of them, so the
    memory held is at most their product.
    """

    MAX_BYTES = 1 << 16
    ENTRIES = 16

    def __init__(self) -> None:
        self._views: dict[tuple[int, int, torch.dtype], np.ndarray] = {}

    def plain(self, t: torch.Tensor) -> np.ndarray | None:
        """:func:`typed_array` of ``t`` if it is a plain CPU tensor NumPy can share (cached when small), else None."""
        if type(t) is not torch.Tensor or not t.is_cpu or t.is_neg() or not t.is_contiguous():
            return None
        dtype = t.dtype
        n = t.numel()
        key = (t.data_ptr(), n, dtype)
        view = self._views.get(key)
        if view is not None:
            return view
        if t.layout != torch.strided or t.is_quantized or t.is_conj() or not reducible(dtype):
            return None
        view = typed_array(t)
        if 0 < n * t.element_size() <= self.MAX_BYTES and not dtype.is_complex:
            views = self._views
            if len(views) >= self.ENTRIES:
                del views[next(iter(views))]
            views[key] = view
        return view
