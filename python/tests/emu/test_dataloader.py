# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""devmemtcp.torch on the emulated devmem NIC (tests/emu): DataLoader
workers (fork and spawn start methods), each reading its share of four
flows through a queue, flows and buffer of its own, and the main-process
reader with a thread per flow.  Real senders (examples/python/sender.py in
the peer namespace) send each flow's samples; every sample is compared
with what was sent, by flow and number.  Run by tests/emu/emu-python.sh
(the python-emu test), which makes the NIC and checks afterwards that
every token came back and the NIC is as it was.

DEVMEMTCP_TEST_DEVICE=cuda (tests/emu/gpu-run.sh on the GPU machine):
CUDA tensors; default CPU tensors (a udmabuf)."""

import importlib.util
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import devmemtcp as dm                     # noqa: E402
from devmemtcp import torch as dmt         # noqa: E402

IFNAME = os.environ.get("EMU_IFNAME", "dsim1")
PEER = os.environ.get("EMU_PEER", "10.77.0.2")
TX = os.environ.get("EMU_TX", "ip netns exec dmtA").split()
DEVICE = os.environ.get("DEVMEMTCP_TEST_DEVICE", "cpu")
SAMPLES = int(os.environ.get("EMU_SAMPLES", "8"))
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..")
SENDER = os.path.join(SRC, "examples", "python", "sender.py")

_spec = importlib.util.spec_from_file_location("sender", SENDER)
sender = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sender)
SIZES = list(sender.sample_sizes(SAMPLES))

if os.geteuid() != 0 or "DEVMEMTCP_EMU" not in os.environ:
    pytest.skip("needs the emulated NIC: run through tests/emu/emu-python.sh (meson test "
                "python-emu)", allow_module_level=True)


class Senders:
    """One examples/python/sender.py per port, in the peer's namespace."""

    def __init__(self, ports, n=SAMPLES):
        self.procs = [subprocess.Popen(TX + [sys.executable, SENDER, "samples", PEER,
                                             str(p), "-n", str(n), "--wait", "120"],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                      for p in ports]

    def wait(self):
        for p in self.procs:
            out = p.communicate(timeout=120)[0].decode()
            assert p.returncode == 0, out

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def check(got, ports, n=SAMPLES):
    """got: (port, index, tensor) triples; every flow's n samples, each
    the bytes its sender sent, in order within the flow."""
    per = {p: [] for p in ports}
    for port, i, t in got:
        per[port].append(i)
        assert t.numel() == SIZES[i], (port, i)
        assert str(t.device).startswith(DEVICE), t.device
        assert bytes(t.cpu().numpy()) == sender.sample_bytes(i, SIZES[i]), (port, i)
    assert {p: v for p, v in per.items()} == {p: list(range(n)) for p in ports}


def dataloader_run(ports, context):
    ds = dmt.DevmemSamples(IFNAME, ports, device=DEVICE, buf_size=16 << 20, meta=True)
    tx = Senders(ports)
    try:
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=4,
                                         multiprocessing_context=context)
        t0 = time.monotonic()
        got = [(p, i, t.clone()) for p, i, t in dl]
        took = time.monotonic() - t0
        tx.wait()
    finally:
        tx.kill()
    check(got, ports)
    nbytes = sum(t.numel() for _, _, t in got)
    print("%s: %d samples, %d bytes in %.2f s" % (context or "fork", len(got), nbytes, took))


def test_dataloader_fork():
    """The default start method on Linux (fork): four workers, a flow each."""
    if DEVICE.startswith("cuda"):
        # a forked worker may use CUDA only if this process has not
        assert not torch.cuda.is_initialized(), "run this test first, on its own"
    dataloader_run([5600, 5602, 5604, 5606], None)


def test_dataloader_spawn():
    dataloader_run([5610, 5612, 5614, 5616], "spawn")


def test_dataloader_worker_ports():
    """The flows are dealt out round-robin; a worker with none yields
    nothing; one queue for several workers is refused."""
    ds = dmt.DevmemSamples(IFNAME, [1, 3, 5, 7, 9])
    assert ds.worker_ports() == [1, 3, 5, 7, 9]
    with pytest.raises(ValueError, match="data ports between 1 and 65534"):
        dmt.DevmemSamples(IFNAME, [0])


def test_threaded_reader_4_flows():
    """The main process reads four flows on four threads (a queue, a
    buffer and a stream of each): every sample in place, in order per
    flow; the iteration ends when every flow has."""
    ports = [5620, 5622, 5624, 5626]
    tx = Senders(ports)
    try:
        t0 = time.monotonic()
        with dmt.ThreadedReader(IFNAME, ports, device=DEVICE, buf_size=16 << 20,
                                meta=True) as r:
            got = [(p, i, t.clone()) for p, i, t in r]
        took = time.monotonic() - t0
        tx.wait()
    finally:
        tx.kill()
    check(got, ports)
    print("threaded: %d samples, %d bytes in %.2f s"
          % (len(got), sum(t.numel() for _, _, t in got), took))


def test_threaded_reader_close_stops_the_threads():
    """close() while threads wait for senders that never come: they stop,
    and the NIC setup is undone (emu-python.sh checks the NIC after)."""
    r = dmt.ThreadedReader(IFNAME, [5630, 5632], device=DEVICE, buf_size=4 << 20)
    t0 = time.monotonic()
    r.close()
    assert time.monotonic() - t0 < 10
    assert all(not t.is_alive() for t in r._threads)


def test_threaded_reader_error_is_raised():
    """A sender that sends a size but no bytes: the flow's EOFError comes
    out of the iteration."""
    import socket
    import struct
    r = dmt.ThreadedReader(IFNAME, [5640], device=DEVICE, buf_size=4 << 20)
    code = ("import socket, struct, time\n"
            "for i in range(100):\n"
            "    try:\n"
            "        c = socket.create_connection(('%s', 5641)); break\n"
            "    except OSError: time.sleep(0.1)\n"
            "d = socket.create_connection(('%s', 5640))\n"
            "c.sendall(struct.pack('!I', 5000)); d.sendall(b'x' * 100); d.close(); c.close()\n"
            % (PEER, PEER))
    p = subprocess.run(TX + [sys.executable, "-c", code], timeout=60)
    assert p.returncode == 0
    with pytest.raises(EOFError, match=r"^the data connection ended inside a sample \(100 of 5000 bytes\)$"):
        for _ in r:
            pass
    r.close()
    del socket, struct
