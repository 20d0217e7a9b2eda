# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The cap on bytes held by live views: a receive takes no more than the
cap leaves, and fails with ENOBUFS once the cap is reached."""

import errno

import numpy as np
import pytest

import devmemtcp as dm
from conftest import BINDING


def test_default_cap_is_half_the_buffer(hostmem):
    assert hostmem.buf.view_cap == hostmem.size // 2


def test_cap_limits_and_refuses(rx, hostmem, fake):
    hostmem.buf.view_cap = 10000
    fake.push(rx, [(i * 4096, 4096) for i in range(4)])
    a = rx.recv()                          # 8192 + 1808 = the cap
    assert a.nbytes == 10000 and hostmem.buf.held == 10000
    with pytest.raises(dm.Error) as e:
        rx.recv()
    assert e.value.errno == errno.ENOBUFS
    assert e.value.strerror == (
        "Rx.recv: live Fragments and their DLPack views hold 10000 bytes of the buffer "
        "of binding %d, at its view_cap of 10000: release Fragments (release(), a with "
        "block, or del) and drop tensors made from them, or raise Buffer.view_cap; bytes "
        "held by views starve the NIC's queue" % BINDING)
    a.release()
    assert hostmem.buf.held == 0
    b = rx.recv()                          # the rest of the receive
    assert b.nbytes == 4 * 4096 - 10000
    b.release()


def test_views_count_against_the_cap(rx, hostmem, fake):
    hostmem.buf.view_cap = 8192
    fake.push(rx, [(0, 4096), (4096, 4096)])
    f = rx.recv()
    v = np.from_dlpack(f)
    f.release()
    fake.push(rx, [(8192, 4096)])
    with pytest.raises(dm.Error) as e:
        rx.recv()
    assert e.value.errno == errno.ENOBUFS
    del v
    with rx.recv() as g:
        assert g.nbytes == 4096
    assert hostmem.buf.held == 0


def test_cap_raised(rx, hostmem, fake):
    hostmem.buf.view_cap = 4096
    fake.push(rx, [(0, 4096), (4096, 4096)])
    a = rx.recv()
    hostmem.buf.view_cap = 1 << 20
    b = rx.recv()
    assert (a.nbytes, b.nbytes, hostmem.buf.held) == (4096, 4096, 8192)
    a.release()
    b.release()
