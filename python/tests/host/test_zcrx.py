# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Zcrx without a zcrx kernel: the argument checks of the binding and of
devmemtcp_zcrx_new (errno and message), Rx(zcrx=...) refusing what is not
an open Zcrx.  Transfers run in the vm suite (python/tests/vm/test_zcrx.py)."""

import errno
import re

import pytest

import devmemtcp as dm


def raises(eno, message, fn, *a, **kw):
    with pytest.raises(dm.Error) as e:
        fn(*a, **kw)
    assert e.value.errno == eno, e.value
    assert re.fullmatch(message, e.value.strerror), e.value.strerror
    return e.value


def test_zcrx_ring_sizes_must_be_powers_of_two(ctx, hostmem):
    raises(errno.EINVAL,
           re.escape("devmemtcp_zcrx_new: rq_entries 3 and cq_entries 0 must be 0 or "
                     "powers of two (at most 32768 and 65536)"),
           dm.Zcrx, ctx, "lo", 0, hostmem.buf, rq_entries=3)
    raises(errno.EINVAL,
           re.escape("devmemtcp_zcrx_new: rq_entries 0 and cq_entries 131072 must be 0 or "
                     "powers of two (at most 32768 and 65536)"),
           dm.Zcrx, ctx, "lo", 0, hostmem.buf, cq_entries=1 << 17)


def test_zcrx_unknown_interface(ctx, hostmem):
    raises(errno.ENODEV, re.escape('no network interface named dsim9'),
           dm.Zcrx, ctx, "dsim9", 0, hostmem.buf)


def test_zcrx_argument_types(ctx, hostmem, conn):
    with pytest.raises(TypeError, match="expected a devmemtcp.Buffer, got object"):
        dm.Zcrx(ctx, "lo", 0, object())
    with pytest.raises(TypeError, match="expected a devmemtcp.Context, got object"):
        dm.Zcrx(object(), "lo", 0, hostmem.buf)
    for bad in ({}, {"rq_entries": -1}, {"cq_entries": 1 << 32}):
        with pytest.raises(ValueError, match=re.escape("queue, rq_entries and cq_entries are between 0 and 2**32 - 1")):
            dm.Zcrx(ctx, "lo", -1 if not bad else 0, hostmem.buf, **bad)
    with pytest.raises(TypeError):
        dm.Zcrx(ctx, "lo", "0", hostmem.buf)
    with pytest.raises(TypeError, match="zcrx must be a devmemtcp.Zcrx, got object"):
        dm.Rx(ctx, conn.server, zcrx=object())


def test_zcrx_unopened_is_closed(ctx, conn):
    """A Zcrx whose constructor never ran (or failed) is closed: every use
    raises ValueError, a receiver refuses it, close() is harmless."""
    z = dm.Zcrx.__new__(dm.Zcrx)
    assert z.closed
    for call in (z.stats, z.wait, lambda: z.queue, lambda: z.ifname):
        with pytest.raises(ValueError, match="Zcrx"):
            call()
    with pytest.raises(ValueError, match="Zcrx"):
        dm.Rx(ctx, conn.server, zcrx=z)
    z.close()
    z.close()
    assert z.buffer is None


def test_zcrx_wait_timeout_argument():
    z = dm.Zcrx.__new__(dm.Zcrx)
    for bad in (-1, float("nan"), 1e10):
        with pytest.raises(ValueError, match="timeout"):
            z.wait(timeout=bad)
