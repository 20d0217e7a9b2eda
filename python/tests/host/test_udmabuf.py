# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""A udmabuf Buffer: read/write through the library and a kDLCPU DLPack
view through numpy.from_dlpack, with fragments of the fake kernel over it.
Skips where /dev/udmabuf is absent (the vm suite runs the same checks on
the capsule in the guest)."""

import os

import numpy as np
import pytest

import devmemtcp as dm
from conftest import BINDING

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/udmabuf"),
                                reason="no /dev/udmabuf on this machine (modprobe udmabuf)")


@pytest.fixture
def udmabuf(ctx):
    with dm.Buffer(ctx, 4 << 20) as b:
        yield b


def test_read_write(udmabuf):
    b = udmabuf
    assert b.provider == dm.PROVIDER_UDMABUF and b.device == (dm.kDLCPU, 0)
    data = os.urandom(10000)
    assert b.write(12345, data) == 10000
    assert b.read(12345, 10000) == data
    into = bytearray(100)
    assert b.readinto(12345, into) == 100 and bytes(into) == data[:100]


def test_buffer_and_fragment_views(ctx, conn, fake, udmabuf):
    udmabuf.write(0, bytes(range(256)) * 64)
    whole = np.from_dlpack(udmabuf)
    assert whole.shape == (4 << 20,) and bytes(whole[:256]) == bytes(range(256))
    with dm.Rx(ctx, conn.server) as rx:
        rx.add_buf(BINDING, udmabuf)
        fake.attach(rx, BINDING)
        fake.push(rx, [(4096, 4096), (8192, 4096)])
        f = rx.recv()
        assert f.read() == udmabuf.read(4096, 8192)
        a = np.from_dlpack(f)
        assert a.ctypes.data == udmabuf.addr(4096) and a.tobytes() == udmabuf.read(4096, 8192)
        f.release()
        del a
        rx.flush()
        assert fake.stats(rx)["outstanding"] == 0
        fd = rx.fileno()
    fake.detach(fd)
