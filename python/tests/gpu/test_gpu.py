# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""GPU tests: fragments in CUDA memory gathered into torch tensors on a
non-default stream, byte-checked; no-copy views through torch.from_dlpack
and cupy.from_dlpack whose tokens go back only after the work queued on the
consumer's stream (delayed with a spin kernel, which must still be running
when the tokens are counted); deleters run on other threads.  Synthetic
fragments come from the fake kernel (test builds).

Skips, saying why, without PyTorch or a CUDA device; the CuPy and JAX tests
skip without CuPy or JAX.  Run by python/tests/gpu-run.sh on the GPU machine.
"""

import ctypes
import gc
import io
import os
import random
import struct
import sys
import threading
import time

import pytest

import devmemtcp as dm
from conftest import BINDING, Conn, fake_rx

torch = pytest.importorskip("torch", reason="PyTorch is not installed: no GPU tests")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device (torch.cuda.is_available() is False): no GPU tests",
                allow_module_level=True)

SIZE = 64 << 20
PAGES = SIZE // 4096
# torch.cuda._sleep spins for this many GPU clock cycles: ~0.3-0.5 s on a
# 1.5-2 GHz GPU, far longer than anything the tests do meanwhile
SPIN_CYCLES = 800_000_000


@pytest.fixture(scope="module")
def gctx():
    with dm.Context() as c:
        yield c


@pytest.fixture(scope="module")
def cudabuf(gctx):
    """64 MiB of GPU memory from the CUDA provider, filled with random
    bytes through its own DLPack view."""
    b = dm.Buffer(gctx, SIZE, "cuda", device=0)
    assert b.device == (dm.kDLCUDA, 0)
    whole = torch.from_dlpack(b)
    assert whole.device == torch.device("cuda", 0) and whole.numel() == SIZE
    g = torch.Generator(device="cuda").manual_seed(1234)
    whole.copy_(torch.randint(0, 256, (SIZE,), dtype=torch.uint8, device="cuda", generator=g))
    torch.cuda.synchronize()
    yield b, whole
    del whole
    b.close()


@pytest.fixture
def grx(gctx, cudabuf, conn):
    with fake_rx(gctx, conn.server, cudabuf[0]) as r:
        yield r, conn


def expected(whole, frags, linear):
    """The bytes of a receive: buffer slices, linear bytes in their place."""
    parts, li = [], 0
    for f in frags:
        if f.flags & dm.FRAG_LINEAR:
            parts.append(torch.frombuffer(bytearray(linear[f.offset:f.offset + f.len]),
                                          dtype=torch.uint8).cuda())
        else:
            parts.append(whole[f.offset:f.offset + f.len])
    return torch.cat(parts)


def settle(r, fake):
    r.flush()
    return fake.stats(r)["outstanding"]


def scattered(n, rnd, sizes=(4096, 1448, 9000, 1, 333)):
    out = []
    for _ in range(n):
        ln = rnd.choice(sizes)
        off = rnd.randrange(0, SIZE - ln)
        out.append((off, ln))
    return out


def test_gather_into_torch_on_a_stream(grx, cudabuf, fake):
    r, _ = grx
    rnd = random.Random(7)
    frags = scattered(600, rnd) + [(0, 777, fake.LINEAR)] + scattered(300, rnd)
    fake.push(r, frags)
    f = r.recv(max_frags=2048, max_bytes=64 << 20)
    assert f.__dlpack_device__() == (dm.kDLCUDA, 0)
    assert len(f) == len(frags) and f.nbytes == sum(x[1] for x in frags)
    want = expected(cudabuf[1], list(f), f.linear)
    s = torch.cuda.Stream()
    dst = torch.full((f.nbytes + 64,), 0xAB, dtype=torch.uint8, device="cuda")
    assert f.gather_into(dst, stream=s) == f.nbytes
    assert f.released
    s.synchronize()
    assert torch.equal(dst[:f.nbytes], want)
    assert bool((dst[f.nbytes:] == 0xAB).all())
    assert settle(r, fake) == 0


def test_gather_many_receives_byte_checked(grx, cudabuf, fake):
    """Receives gathered back to back into one tensor, as a loader does."""
    r, _ = grx
    rnd = random.Random(11)
    pages = rnd.sample(range(PAGES), 2000)
    s = torch.cuda.Stream()
    out = torch.zeros(2000 * 4096, dtype=torch.uint8, device="cuda")
    for i in range(0, 2000, 100):
        fake.push(r, [(p * 4096, 4096) for p in pages[i:i + 100]])
    pos = 0
    while pos < out.numel():
        f = r.recv()
        pos += f.gather_into(out[pos:pos + f.nbytes], s)
    s.synchronize()
    want = torch.cat([cudabuf[1][p * 4096:(p + 1) * 4096] for p in pages])
    assert torch.equal(out, want)
    assert settle(r, fake) == 0


def spin(stream, cycles=SPIN_CYCLES):
    """Keep stream busy for cycles GPU clock cycles."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(cycles)


def held_while_busy(r, fake, stream, n):
    """n tokens are still out while stream has not finished.  The count is
    read first and the stream asked after: had anything in the test waited
    for the device meanwhile (a module loaded on first use, the receiver's
    Gpu made, may synchronise the whole context), the check fails as such
    instead of as an early release, or passing for the wrong reason."""
    time.sleep(0.05)
    got = settle(r, fake)
    assert not stream.query(), (
        "the stream had finished its spin when the tokens were counted: something in the "
        "test waited for the device before the check, which proves nothing")
    assert got == n


def released_after(r, fake, stream):
    """Once the stream's work is done, the tokens go back."""
    stream.synchronize()
    assert settle(r, fake) == 0


REHEARSAL = 1000


def rehearsed(run, r, fake, stream, n):
    """run(cycles) spins stream for cycles and does a test's steps.  It runs
    first with a spin too short to matter, which makes and loads everything
    the steps use (the receiver's Gpu, the kernels of torch, CuPy and the
    library), then with a long spin, which must still be running when the
    n tokens are counted.  Returns what the second run returned."""
    run(REHEARSAL)
    released_after(r, fake, stream)
    out = run(SPIN_CYCLES)
    held_while_busy(r, fake, stream, n)
    released_after(r, fake, stream)
    return out


def test_gather_release_waits_for_the_stream(grx, cudabuf, fake):
    r, _ = grx
    s = torch.cuda.Stream()
    dst = torch.empty(8192, dtype=torch.uint8, device="cuda")

    def run(cycles):
        fake.push(r, [(4096 * 10, 4096), (4096 * 3, 4096)])
        f = r.recv()
        spin(s, cycles)                         # the stream is busy
        f.gather_into(dst, s)
        assert f.released

    rehearsed(run, r, fake, s, 2)               # held: the gather has not run
    whole = cudabuf[1]
    assert torch.equal(dst, torch.cat([whole[40960:45056], whole[12288:16384]]))


def test_torch_view_released_after_stream_work(grx, cudabuf, fake):
    r, _ = grx
    s = torch.cuda.Stream()

    def run(cycles):
        fake.push(r, [(8192, 4096), (12288, 4096), (16384, 4096)])
        f = r.recv()
        with torch.cuda.stream(s):
            t = torch.from_dlpack(f)            # exported on stream s
            assert t.device == torch.device("cuda", 0) and t.numel() == 12288
            assert t.data_ptr() == cudabuf[0].addr(8192)
            torch.cuda._sleep(cycles)
            copy = t.clone()                    # reads the bytes after the spin
        f.release()
        del t
        gc.collect()
        return copy

    copy = rehearsed(run, r, fake, s, 3)        # held: the clone has not run
    assert torch.equal(copy, cudabuf[1][8192:8192 + 12288])


def test_torch_view_deleted_on_another_thread(grx, cudabuf, fake):
    r, _ = grx
    s = torch.cuda.Stream()

    def run(cycles):
        fake.push(r, [(0, 4096), (4096, 4096)])
        f = r.recv()
        with torch.cuda.stream(s):
            t = torch.from_dlpack(f)
            torch.cuda._sleep(cycles)
            total = t.sum(dtype=torch.int64)
        f.release()
        box = [t]
        del t
        who = []

        def drop():
            who.append(threading.get_ident())
            box.clear()                         # the deleter runs here

        th = threading.Thread(target=drop)
        th.start()
        th.join(10)
        assert who and who[0] != threading.get_ident() and not box
        return total

    total = rehearsed(run, r, fake, s, 2)
    assert int(total) == int(cudabuf[1][0:8192].sum(dtype=torch.int64))


def test_raw_deleter_without_the_gil(grx, fake):
    """A consumer that calls the deleter itself from a native thread: the
    release still waits for the stream named at export."""
    r, _ = grx
    s = torch.cuda.Stream()
    from conftest import Versioned, capi

    def run(cycles):
        fake.push(r, [(0, 4096)])
        f = r.recv()
        spin(s, cycles)
        cap = f.__dlpack__(stream=s.cuda_stream, max_version=(1, 0))
        m = Versioned.from_address(capi.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
        assert m.dl_tensor.device_type == dm.kDLCUDA
        assert capi.PyCapsule_SetName(cap, b"used_dltensor_versioned") == 0
        del cap
        f.release()
        th = threading.Thread(target=m.deleter, args=(ctypes.pointer(m),))
        th.start()
        th.join(10)
        assert not th.is_alive()

    rehearsed(run, r, fake, s, 1)


def test_cupy_view_released_after_stream_work(grx, cudabuf, fake):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    r, _ = grx
    cs = cupy.cuda.Stream(non_blocking=True)
    ts = torch.cuda.ExternalStream(cs.ptr)      # the same stream, to spin and ask

    def run(cycles):
        fake.push(r, [(40960, 4096), (45056, 4096)])
        f = r.recv()
        with cs:
            a = cupy.from_dlpack(f)             # exported on CuPy's stream
            assert a.data.ptr == cudabuf[0].addr(40960) and a.size == 8192
            spin(ts, cycles)
            b = a.copy()
        f.release()
        del a
        gc.collect()
        return b

    b = rehearsed(run, r, fake, ts, 2)
    assert torch.equal(torch.from_dlpack(b), cudabuf[1][40960:40960 + 8192])


def test_jax_view(grx, cudabuf, fake):
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    jdl = pytest.importorskip("jax.dlpack", reason="JAX has no jax.dlpack")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU (jax.devices(): %s)" % jax.devices())
    r, _ = grx
    fake.push(r, [(0, 4096), (4096, 4096)])
    f = r.recv()
    x = jdl.from_dlpack(f)
    got = torch.from_dlpack(x)
    assert torch.equal(got, cudabuf[1][0:8192])
    f.release()
    del x, got
    gc.collect()
    torch.cuda.synchronize()
    assert settle(r, fake) == 0


def test_torch_loader_assembles_samples(grx, cudabuf, fake):
    """devmemtcp.torch.assemble (which examples/python/torch_loader.py
    uses) cuts the stream at sample boundaries (sizes from the control
    connection) and gathers each sample into its own tensor: fed here by
    the fake kernel from pages of the buffer that hold the pattern of
    examples/python/sender.py."""
    from devmemtcp import torch as dmt
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                    "examples", "python"))
    import sender
    import torch_loader
    r, _ = grx
    sizes = [5000, 70001, 1, 4096, 300000]
    stream = b"".join(sender.sample_bytes(i, n) for i, n in enumerate(sizes))
    whole = cudabuf[1]
    rnd = random.Random(5)
    pages = rnd.sample(range(PAGES), (len(stream) + 4095) // 4096)
    frags = []
    for j, p in enumerate(pages):
        chunk = stream[j * 4096:(j + 1) * 4096]
        whole[p * 4096:p * 4096 + len(chunk)] = torch.frombuffer(bytearray(chunk), dtype=torch.uint8).cuda()
        frags.append((p * 4096, len(chunk)))
    torch.cuda.synchronize()
    for i in range(0, len(frags), 16):
        fake.push(r, frags[i:i + 16])
    ctrl = io.BytesIO(b"".join(struct.pack("!I", n) for n in sizes))
    s = torch.cuda.Stream()
    got = list(dmt.assemble(r, ctrl, torch.device("cuda", 0), s))
    torch.cuda.synchronize()
    assert [t.numel() for t in got] == sizes
    for i, t in enumerate(got):
        assert torch.equal(t, torch_loader.expected(i, sizes[i], t.device)), i
    assert settle(r, fake) == 0


def test_explicit_gpu_and_errors(gctx, cudabuf, fake):
    c = Conn()
    with dm.Gpu(gctx, 0, slots=2) as g, dm.Rx(gctx, c.server, gpu=g) as r:
        assert g.device == 0
        r.add_buf(BINDING, cudabuf[0])
        fake.attach(r, BINDING)
        fake.push(r, [(0, 4096)])
        f = r.recv()
        with pytest.raises(ValueError, match="^dst is on device \\(1, 0\\) but the fragments on \\(2, 0\\)"):
            import numpy as np
            f.gather_into(np.zeros(4096, np.uint8))
        with pytest.raises(dm.Error) as e:
            f.read()
        assert e.value.strerror == ("the fragments are in device memory, which the CPU cannot read: "
                                    "gather_into() a tensor on their device")
        dst = torch.empty(4096, dtype=torch.uint8, device="cuda")
        f.gather_into(dst)                       # legacy default stream
        torch.cuda.synchronize()
        assert torch.equal(dst, cudabuf[1][0:4096])
        fd = r.fileno()
    fake.detach(fd)
    c.close()
    with pytest.raises(dm.Error) as e:
        dm.Gpu(gctx, torch.cuda.device_count() + 3)
    print("Gpu on a missing device:", e.value)


def test_flat_memory_with_gathers(grx, fake):
    import tracemalloc
    r, _ = grx
    fake.cycle(r, [(i * 8192, 4096) for i in range(16)])
    s = torch.cuda.Stream()
    dst = torch.empty(16 * 4096, dtype=torch.uint8, device="cuda")

    def run(n):
        for _ in range(n):
            r.recv().gather_into(dst, s)

    run(2000)
    s.synchronize()
    gc.collect()
    tracemalloc.start()
    t0, _ = tracemalloc.get_traced_memory()
    run(20000)
    s.synchronize()
    gc.collect()
    t1, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert t1 - t0 < 16 << 10
    st = (r.flush(), fake.stats(r))[1]
    assert st["outstanding"] == 0 and st["bad"] == 0
    assert st["freed"] == 16 * 22000
