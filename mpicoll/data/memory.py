"""Host views of DLPack producers and ``__cuda_array_interface__`` objects, as mpi4py reads them.

mpi4py takes any DLPack producer or ``__cuda_array_interface__`` (CAI) object as a
buffer and hands its address to MPI.  mpicoll computes on host memory with NumPy,
so it needs a NumPy view of such an object when its memory is host memory:

- DLPack: ``np.from_dlpack`` where NumPy has the element type; otherwise the
  capsule of one more ``__dlpack__()`` is read (not renamed) and kept alive by
  the view, so that the producer's own capsule destructor frees the tensor
  when the view goes away, as mpi4py does.
- CAI: the pointer is host memory when no CUDA driver is loadable, or when the
  driver says it is not device memory (``cuPointerGetAttribute``); a CUDA-aware
  test suite uses such objects over host memory.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

__all__ = ["dlpack_on_device", "dlpack_host_view", "dlpack_view", "cai_on_device", "cai_host_view", "known_bounds",
           "span_view"]

_KDL_CPU, _KDL_CUDA_HOST = 1, 3          # DLDeviceType values whose memory the CPU can read
_DL_CODES = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}   # DLDataTypeCode -> NumPy kind (6: bool)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Held:
    """Exposes ``__array_interface__`` and keeps ``owner`` (a capsule or the object) alive with the view."""

    def __init__(self, interface: dict, owner: Any) -> None:
        self.__array_interface__ = interface
        self.owner = owner


def dlpack_on_device(obj: Any) -> bool:
    """Whether a DLPack producer's memory is not readable by the CPU (e.g. CUDA device memory)."""
    device = getattr(obj, "__dlpack_device__", None)
    if device is None:
        return False
    return int(device()[0]) not in (_KDL_CPU, _KDL_CUDA_HOST)


def dlpack_host_view(obj: Any) -> np.ndarray:
    """A NumPy view of a host DLPack producer; ``__dlpack__`` is called once, its capsule lives with the view."""
    view = dlpack_view(obj)
    if view is None:
        raise BufferError("dlpack_host_view: the DLPack tensor is in device memory")
    return view


def dlpack_view(obj: Any) -> np.ndarray | None:
    """A NumPy view of a DLPack producer whose memory the CPU can read, else None (device memory: the
    caller exports it again to its device library).

    NumPy's own reader (``np.from_dlpack``, compiled) takes the element types NumPy has; the others
    (bfloat16, float8, types NumPy lacks) and device memory are read here from a second export, whose
    capsule lives with the view; the device is read from the exported tensor.
    """
    try:
        return np.from_dlpack(obj, copy=False)
    except (TypeError, ValueError, RuntimeError, BufferError):
        pass
    capsule = obj.__dlpack__()
    address = _capsule_pointer(capsule, b"dltensor")   # raises if the capsule was already consumed
    tensor = _DLTensor.from_address(address)  # a DLManagedTensor starts with its DLTensor
    if tensor.device.device_type not in (_KDL_CPU, _KDL_CUDA_HOST):
        return None
    dtype, per = _dl_dtype(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    ndim = tensor.ndim
    shape = tuple((ctypes.c_int64 * ndim).from_address(tensor.shape)) if ndim else ()
    strides = None if not tensor.strides else tuple(
        s * per for s in (ctypes.c_int64 * ndim).from_address(tensor.strides))
    data = (tensor.data or 0) + tensor.byte_offset
    # the interface spells the element by its size; ml_dtypes' types (bfloat16, ...) are a view of that
    interface = {"version": 3, "shape": shape, "typestr": dtype.str if dtype.isbuiltin == 1 else f"|V{per}",
                 "data": (data, False), "strides": strides}
    array = np.asarray(_Held(interface, capsule))
    return array if array.dtype == dtype else array.view(dtype)


#: DLDataTypeCode -> the ml_dtypes name of its 8- or 16-bit element (DLPack 1.1: kDLBfloat = 4, kDLFloat8_* = 7..14)
_DL_ML_DTYPES = {(4, 16): "bfloat16", (7, 8): "float8_e3m4", (8, 8): "float8_e4m3", (9, 8): "float8_e4m3b11fnuz",
                 (10, 8): "float8_e4m3fn", (11, 8): "float8_e4m3fnuz", (12, 8): "float8_e5m2",
                 (13, 8): "float8_e5m2fnuz", (14, 8): "float8_e8m0fnu"}


def _dl_dtype(code: int, bits: int, lanes: int) -> tuple[np.dtype, int]:
    """The NumPy dtype of a DLPack data type and the bytes per element.

    Every element type is itself: bfloat16 and the float8 types as ``ml_dtypes`` spells them (where it is
    installed), so that they reduce as what they are.  A type NumPy cannot express is an opaque element of
    its size (``V<bytes>``): data movement carries it, and a reduction refuses it (never one of its bytes).
    """
    if code == 2 and lanes == 2 and bits in (32, 64, 8 * np.dtype(np.longdouble).itemsize):
        return np.dtype(np.clongdouble if bits > 64 else f"c{bits // 4}"), bits // 4
    per = (bits * lanes + 7) // 8
    if lanes == 1 and code in _DL_CODES:
        if code == 6 and bits == 8:
            return np.dtype("?"), 1
        if code == 2 and bits > 64 and bits == 8 * np.dtype(np.longdouble).itemsize:
            return np.dtype(np.longdouble), per
        if code != 6:
            try:
                return np.dtype(f"{_DL_CODES[code]}{bits // 8}"), per
            except TypeError:
                pass
    name = _DL_ML_DTYPES.get((code, bits)) if lanes == 1 else None
    if name is not None:
        try:
            import ml_dtypes  # noqa: PLC0415 (only for these element types)

            return np.dtype(getattr(ml_dtypes, name)), per
        except (ImportError, AttributeError):
            pass
    return np.dtype(f"V{per}"), per


def known_bounds(array: np.ndarray) -> tuple[int, int] | None:
    """The memory known to lie around host ``array``: (bytes before its start, bytes from its start to the
    end), or None where mpicoll cannot know (an ``MPI.memory`` made from an address, DLPack, CAI).

    A message described by an address and a datatype may reach past the Python object that carries the
    address (a view into a larger array, a memory object over part of a tensor): MPI takes it, and so does
    mpicoll where the memory is known to be there, or cannot be known (then it defers to MPI, as the
    built-in does).  What is known: the NumPy array that owns the memory a view lies in, and the
    bytes-like object (``bytes``, ``bytearray``, ``array.array``, ``mmap``, a memory object over one)
    behind it.
    """
    owner: Any = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    start = array.__array_interface__["data"][0]
    if isinstance(owner, np.ndarray):
        lo = owner.__array_interface__["data"][0]
        return start - lo, lo + owner.nbytes - start
    from mpi4py import MPI  # noqa: PLC0415 (this module needs no MPI otherwise)

    if isinstance(owner, MPI.buffer):
        if owner.obj is None:    # made from an address: its length says nothing of the memory around it
            return None
        lo, size = owner.address, owner.nbytes
    else:
        try:
            raw = np.frombuffer(owner, np.uint8)
        except (TypeError, ValueError, BufferError):
            return None
        lo, size = raw.__array_interface__["data"][0], raw.nbytes
    return start - lo, lo + size - start


def span_view(array: np.ndarray, start: int, stop: int, dtype: np.dtype) -> np.ndarray:
    """``dtype`` elements over bytes ``start .. stop`` from the start of host ``array``, which may reach past
    its end (the caller checked :func:`known_bounds`); writable where ``array`` is."""
    from mpi4py import MPI  # noqa: PLC0415

    address = array.__array_interface__["data"][0] + start
    memory = MPI.memory.fromaddress(address, stop - start, readonly=not array.flags.writeable)
    return np.frombuffer(memory, dtype)


def cai_on_device(obj: Any) -> bool:
    """Whether a ``__cuda_array_interface__`` object's memory is device memory (not host memory)."""
    pointer = obj.__cuda_array_interface__["data"][0]
    if not pointer:   # an empty array has no memory to ask about: a GPU array library's arrays are device arrays
        return type(obj).__module__.split(".")[0] in _GPU_ARRAY_LIBRARIES
    return is_device_pointer(pointer)


#: the packages whose ``__cuda_array_interface__`` objects are device arrays even when empty (a null pointer)
_GPU_ARRAY_LIBRARIES = ("cupy", "numba", "torch", "jax", "jaxlib", "pycuda")


def cai_host_view(obj: Any) -> np.ndarray:
    """A NumPy view of a CAI object whose memory is host memory (kept alive with the view)."""
    cai = obj.__cuda_array_interface__
    pointer, readonly = cai["data"]
    interface = {"version": 3, "shape": tuple(cai["shape"]), "typestr": cai["typestr"],
                 "data": (pointer or 0, bool(readonly)), "strides": cai.get("strides")}
    return np.asarray(_Held(interface, obj))


@functools.lru_cache(maxsize=1)
def _cuda_driver() -> Any:
    """The CUDA driver library, initialised, or None where there is none (then no memory is device memory)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if lib.cuInit(0) != 0:
        return None
    return lib


def is_device_pointer(pointer: int) -> bool:
    """Whether the CUDA driver says ``pointer`` is device (or managed) memory; False without a driver."""
    lib = _cuda_driver()
    if lib is None:
        return False
    memtype = ctypes.c_uint(0)
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_MEMORYTYPE_HOST = 2, 1  # noqa: N806 - the driver's names
    status = lib.cuPointerGetAttribute(ctypes.byref(memtype), CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       ctypes.c_void_p(pointer))
    # an error (CUDA_ERROR_INVALID_VALUE) means memory the driver does not know: plain host memory
    return status == 0 and memtype.value != CU_MEMORYTYPE_HOST
