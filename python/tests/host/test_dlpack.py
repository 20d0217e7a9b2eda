# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""DLPack: fragments and buffers exported as kDLCPU views (host memory),
versioned and legacy capsules, and the deleter run from another thread."""

import ctypes
import gc
import threading

import numpy as np
import pytest

import devmemtcp as dm

from conftest import Legacy, Versioned, capi


def outstanding(rx, fake):
    rx.flush()
    return fake.stats(rx)["outstanding"]


def test_numpy_view_holds_tokens(rx, hostmem, fake):
    fake.push(rx, [(4096, 4096), (8192, 4096)])
    f = rx.recv()
    assert f.__dlpack_device__() == (dm.kDLCPU, 0)
    a = np.from_dlpack(f)
    assert a.dtype == np.uint8 and a.shape == (8192,)
    assert a.ctypes.data == hostmem.base + 4096
    assert a.tobytes() == hostmem.mem[4096:12288]
    f.release()                      # the view still reads the bytes
    assert outstanding(rx, fake) == 2 and hostmem.buf.held == 8192
    del a
    gc.collect()
    assert outstanding(rx, fake) == 0 and hostmem.buf.held == 0
    assert fake.stats(rx)["bad"] == 0


def test_versioned_capsule(rx, hostmem, fake):
    fake.push(rx, [(16384, 4096), (20480, 1000)])
    f = rx.recv()
    cap = f.__dlpack__(max_version=(1, 0))
    assert capi.PyCapsule_GetName(cap) == b"dltensor_versioned"
    m = Versioned.from_address(capi.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
    t = m.dl_tensor
    assert (m.major, m.minor, m.flags) == (1, 0, 0)
    assert t.data == hostmem.base + 16384 and t.byte_offset == 0
    assert (t.device_type, t.device_id, t.ndim) == (dm.kDLCPU, 0, 1)
    assert (t.code, t.bits, t.lanes) == (1, 8, 1)      # kDLUInt, 8 bits
    assert t.shape[0] == 5096 and not t.strides
    f.release()
    assert outstanding(rx, fake) == 2
    del cap                       # never consumed: the destructor deletes
    assert outstanding(rx, fake) == 0


def test_legacy_capsule(rx, fake):
    fake.push(rx, [(0, 4096)])
    f = rx.recv()
    for mv in (None, (0, 8)):
        cap = f.__dlpack__(max_version=mv)
        assert capi.PyCapsule_GetName(cap) == b"dltensor"
        t = Legacy.from_address(capi.PyCapsule_GetPointer(cap, b"dltensor")).dl_tensor
        assert t.shape[0] == 4096 and t.device_type == dm.kDLCPU
        del cap
    f.release()
    assert outstanding(rx, fake) == 0


@pytest.mark.parametrize("versioned", [True, False])
def test_deleter_on_another_thread(rx, fake, versioned):
    """A consumer takes the capsule and calls the deleter later from a
    thread of its own, without the GIL (ctypes drops it for the call)."""
    fake.push(rx, [(0, 4096), (4096, 4096)])
    f = rx.recv()
    name, used, T = ((b"dltensor_versioned", b"used_dltensor_versioned", Versioned)
                     if versioned else (b"dltensor", b"used_dltensor", Legacy))
    cap = f.__dlpack__(max_version=(1, 0) if versioned else None)
    m = T.from_address(capi.PyCapsule_GetPointer(cap, name))
    assert capi.PyCapsule_SetName(cap, used) == 0
    del cap                       # consumed: the destructor must not delete
    f.release()
    assert outstanding(rx, fake) == 2
    done = []
    th = threading.Thread(target=lambda: (m.deleter(ctypes.pointer(m)), done.append(1)))
    th.start()
    th.join(10)
    assert done == [1]
    assert outstanding(rx, fake) == 0
    st = fake.stats(rx)
    assert (st["freed"], st["bad"]) == (2, 0)


def test_two_views_and_release(rx, fake):
    fake.push(rx, [(0, 4096)])
    f = rx.recv()
    a, b = np.from_dlpack(f), np.from_dlpack(f)
    del f
    gc.collect()
    del a
    assert outstanding(rx, fake) == 1
    del b
    assert outstanding(rx, fake) == 0


def test_not_one_range(rx, fake):
    fake.push(rx, [(0, 4096), (8192, 4096)])
    with rx.recv() as f:
        with pytest.raises(BufferError, match="^the 2 fragments are 2 separate device ranges: a DLPack tensor is one range; use gather_into\\(\\)$"):
            f.__dlpack__()
    fake.push(rx, [(0, 4096), (0, 10, fake.LINEAR)])
    with rx.recv() as f:
        with pytest.raises(BufferError, match="^10 bytes arrived as linear \\(host\\) data, not in the buffer: use gather_into\\(\\) or read\\(\\)$"):
            f.__dlpack__()


def test_export_arguments(rx, fake):
    fake.push(rx, [(0, 4096)])
    with rx.recv() as f:
        with pytest.raises(BufferError, match="^copy=True: this producer exports views only"):
            f.__dlpack__(copy=True)
        with pytest.raises(BufferError, match="^the bytes are on device \\(1, 0\\): no copy to \\(2, 0\\)$"):
            f.__dlpack__(dl_device=(dm.kDLCUDA, 0))
        with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
            f.__dlpack__(strem=None)
        with pytest.raises(TypeError, match="keyword arguments only"):
            f.__dlpack__(None)
        cap = f.__dlpack__(stream=None, max_version=(1, 1), dl_device=(dm.kDLCPU, 0), copy=False)
        del cap
    rx.flush()
    assert fake.stats(rx)["outstanding"] == 0


def test_buffer_view(hostmem):
    a = np.from_dlpack(hostmem.buf)
    assert a.shape == (hostmem.size,) and a.ctypes.data == hostmem.base
    hostmem.mem[100:104] = b"\x01\x02\x03\x04"   # a view, not a copy
    assert a[100:104].tolist() == [1, 2, 3, 4]
    hostmem.buf.close()           # the view keeps the buffer alive
    assert a[101] == 2
    del a


def test_unknown_device(ctx, hostmem):
    with dm.Buffer(ctx, 4096, "import", fd=hostmem.fd, keep_fd=True,
                   segments=[(0, 4096, hostmem.base)]) as b:
        assert b.device == (0, 0)
        with pytest.raises(BufferError, match="^the buffer's device is unknown: give dl_device= when importing it$"):
            b.__dlpack__()
