# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Receiving synthetic fragments: their fields, bytes, and the tokens going
back exactly once however the Fragments is let go."""

import errno
import gc

import numpy as np
import pytest

import devmemtcp as dm
from conftest import BINDING


def test_fragment_fields(rx, hostmem, fake):
    fake.push(rx, [(8192, 4096), (0, 1448), (0, 100, fake.LINEAR), (65536, 4096)])
    f = rx.recv()
    assert len(f) == 4 and bool(f)
    assert f.nbytes == 4096 + 1448 + 100 + 4096
    assert f.dmabuf_bytes == 4096 + 1448 + 4096
    assert [tuple(x) for x in f] == [
        (8192, hostmem.base + 8192, 4096, 0, BINDING, 0),
        (0, hostmem.base, 1448, 1, BINDING, 0),
        (0, 0, 100, 0, 0, dm.FRAG_LINEAR),
        (65536, hostmem.base + 65536, 4096, 2, BINDING, 0),
    ]
    assert f[-1].offset == 65536 and f[2].flags == dm.FRAG_LINEAR
    with pytest.raises(IndexError):
        f[4]
    # linear bytes are the pattern at their stream position (5544)
    assert f.linear == fake.pattern(4096 + 1448, 100)
    assert hostmem.buf.held == 4096 + 1448 + 4096
    f.release()
    assert f.released and hostmem.buf.held == 0
    assert repr(f) == "<devmemtcp.Fragments 4 fragments, 9740 bytes, released>"


def test_read_in_stream_order(rx, hostmem, fake):
    frags = [(12288, 4096), (0, 64, fake.LINEAR), (4096, 1000), (8192, 4096)]
    fake.push(rx, frags)
    with rx.recv() as f:
        got = f.read()
    mem = hostmem.mem
    assert got == mem[12288:16384] + fake.pattern(4096, 64) + mem[4096:5096] + mem[8192:12288]


def test_ranges_merge_adjacent(rx, hostmem, fake):
    fake.push(rx, [(0, 4096), (4096, 4096), (0, 10, fake.LINEAR), (16384, 4096)])
    with rx.recv() as f:
        assert f.ranges() == [(hostmem.base, 8192), (hostmem.base + 16384, 4096)]


def test_receive_cut_at_max_bytes(rx, fake):
    """The kernel cuts a fragment where the caller's byte count ends; the
    rest comes next, with a token of its own."""
    fake.push(rx, [(0, 4096), (4096, 4096), (8192, 4096)])
    a = rx.recv(max_bytes=6000)
    assert [(x.offset, x.len, x.token) for x in a] == [(0, 4096, 0), (4096, 1904, 1)]
    b = rx.recv()
    assert [(x.offset, x.len, x.token) for x in b] == [(6000, 2192, 2), (8192, 4096, 3)]
    a.release()
    b.release()
    rx.flush()
    st = fake.stats(rx)
    assert (st["freed"], st["bad"], st["outstanding"]) == (4, 0, 0)


def test_max_frags_limits_a_receive(rx, fake):
    fake.push(rx, [(i * 4096, 4096) for i in range(10)])
    with rx.recv(max_frags=3) as f:
        assert len(f) == 3
    with rx.recv() as f:
        assert len(f) == 7


def test_tokens_released_exactly_once(rx, fake):
    """release(), a second release(), a with block around a released
    object, and garbage collection: each token goes back once."""
    for _ in range(4):
        fake.push(rx, [(0, 4096), (8192, 4096)])
    a = rx.recv()
    a.release()
    a.release()
    with rx.recv() as b:
        pass
    b.release()
    c = rx.recv()
    del c
    d = rx.recv()
    with d:
        d.release()
    gc.collect()
    rx.flush()
    st = fake.stats(rx)
    assert (st["frags"], st["freed"], st["bad"], st["outstanding"]) == (8, 8, 0, 0)
    assert rx.stats()["tokens_outstanding"] == 0
    assert rx.stats()["tokens_released"] == 8


def test_released_fragments_refuse_access(rx, fake):
    fake.push(rx, [(0, 4096)])
    f = rx.recv()
    f.release()
    assert len(f) == 1 and f.nbytes == 4096
    for op in (lambda: f[0], f.read, f.ranges, lambda: f.gather_into(np.zeros(4096, np.uint8))):
        with pytest.raises(ValueError, match="^the Fragments were released: their bytes may be overwritten by the NIC$"):
            op()
    with pytest.raises(BufferError, match="^the Fragments were released$"):
        f.__dlpack__()


def test_gather_into_numpy(rx, hostmem, fake):
    fake.push(rx, [(40960, 4096), (0, 300, fake.LINEAR), (4096, 1448), (0, 4096)])
    f = rx.recv()
    expect = f.read()
    dst = np.zeros(f.nbytes + 16, dtype=np.uint8)
    assert f.gather_into(dst) == f.nbytes
    assert bytes(dst[:f.nbytes]) == expect and not dst[f.nbytes:].any()
    assert f.released and hostmem.buf.held == 0
    rx.flush()
    assert fake.stats(rx)["outstanding"] == 0


def test_gather_into_wider_dtype(rx, fake):
    fake.push(rx, [(0, 4096), (8192, 4096)])
    f = rx.recv()
    expect = f.read()
    dst = np.zeros(1024, dtype=np.float64)  # 8192 bytes
    f.gather_into(dst)
    assert dst.tobytes() == expect


def test_gather_into_too_small(rx, fake):
    fake.push(rx, [(0, 4096), (8192, 4096)])
    f = rx.recv()
    with pytest.raises(dm.Error) as e:
        f.gather_into(np.zeros(8000, np.uint8))
    assert e.value.errno == errno.ENOSPC
    assert e.value.strerror == "the fragments hold 8192 bytes but dst only 8000: give more room"
    assert not f.released
    f.release()


def test_gather_into_refuses_non_contiguous(rx, fake):
    fake.push(rx, [(0, 4096)])
    f = rx.recv()
    dst = np.zeros((64, 128), np.uint8)[:, ::2]
    with pytest.raises(BufferError, match="^dst must be contiguous"):
        f.gather_into(dst)
    with pytest.raises(TypeError, match="^dst must support DLPack"):
        f.gather_into(bytearray(4096))
    f.release()


def test_end_of_stream(rx, conn):
    conn.client.close()
    f = rx.recv()
    assert len(f) == 0 and not f and f.nbytes == 0 and f.linear == b""
    f.release()


def test_plain_data_is_linear(rx, conn):
    """A flow that is not steered to a devmem queue arrives as linear data
    (here: the real loopback socket under the fake's empty queue)."""
    conn.client.sendall(b"plain bytes")
    f = rx.recv()
    assert [tuple(x) for x in f] == [(0, 0, 11, 0, 0, dm.FRAG_LINEAR)]
    assert f.linear == b"plain bytes" and f.read() == b"plain bytes"
    assert rx.stats()["steering_misses"] == 1


def test_foreign_binding(ctx, conn, fake):
    """Fragments of a binding the receiver does not know are flagged
    FOREIGN, have no address, and their tokens still go back."""
    with dm.Rx(ctx, conn.server) as r:
        fake.attach(r, 99)
        fake.push(r, [(0, 4096)])
        f = r.recv()
        assert f[0].flags == dm.FRAG_FOREIGN and f[0].addr == 0
        with pytest.raises(dm.Error) as e:
            f.read()
        assert e.value.errno == errno.EINVAL
        assert e.value.strerror == "fragment 0 (binding 99) has no address: register its binding's buffer with Rx.add_buf()"
        f.release()
        r.flush()
        assert fake.stats(r)["outstanding"] == 0
        fake.detach(r)


class CountingDst:
    """A numpy array behind a DLPack producer that counts its imports."""

    def __init__(self, n):
        self.a = np.zeros(n, dtype=np.uint8)
        self.imports = 0

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, **kw):
        self.imports += 1
        return self.a.__dlpack__()


def test_recv_into_host(rx, hostmem, fake, conn):
    """recv_into: a receive copied into dst at offset and its tokens back,
    no Fragments; the destination imported once while it comes back."""
    from conftest import expected_bytes
    frags = [[(12288, 4096), (0, 64, fake.LINEAR)], [(4096, 1000), (8192, 4096)]]
    for fr in frags:
        fake.push(rx, fr)
    dst = CountingDst(10000)
    assert rx.recv_into(dst, 7) == 4160
    assert rx.recv_into(dst, offset=7 + 4160) == 5096
    assert dst.imports == 1
    want = expected_bytes(hostmem.mem, frags[0]) + expected_bytes(hostmem.mem, frags[1], 4160)
    assert bytes(dst.a[7:7 + 9256]) == want
    rx.flush()      # releases go to the kernel at the next receive, or now
    assert fake.stats(rx)["outstanding"] == 0 and hostmem.buf.held == 0
    # no more than the room after offset; the rest comes next time
    fake.push(rx, [(0, 4096)])
    assert rx.recv_into(dst, 10000 - 96) == 96
    assert rx.recv_into(dst) == 4000
    with pytest.raises(dm.Error) as e:
        rx.recv_into(dst, 10000)
    assert e.value.errno == errno.ENOSPC
    assert e.value.strerror == "offset 10000 leaves no room in dst of 10000 bytes"
    with pytest.raises(TypeError, match="missing required argument 'dst'"):
        rx.recv_into()
    # the end of the stream: 0
    conn.client.close()
    assert rx.recv_into(dst) == 0
    assert fake.stats(rx)["bad"] == 0


def test_recv_into_device_memory_needs_a_device_dst(ctx, conn, fake):
    from conftest import HostMem, fake_rx
    h = HostMem(ctx, 1 << 20, device=(dm.kDLCUDA, 0))
    with fake_rx(ctx, conn.server, h.buf) as r:
        fake.push(r, [(0, 4096)])
        with pytest.raises(dm.Error) as e:
            r.recv_into(np.zeros(8192, dtype=np.uint8))
        assert e.value.errno == errno.EINVAL
        assert e.value.strerror == ("dst is on device (1, 0) but the fragments on (2, 0): "
                                    "give a tensor on the buffer's device")
        r.flush()
        assert fake.stats(r)["outstanding"] == 0
    h.close()
