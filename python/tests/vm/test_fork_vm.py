# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""vm suite: fork() with a parent's Tx, TX Binding and Zcrx (python/README.md,
"fork"; devmemtcp(7), FORK).  A forked child's calls on them raise
devmemtcp.Error with EBADFD and the message saying why; the child lets go of
them without touching what the parent uses: the parent's binding stays bound
and sends on, its zcrx queue stays registered and receives on, every byte
checked."""

import errno
import socket
import threading
import time

import pytest

import devmemtcp as dm
from conftest import FORK_REFUSED, in_child
from test_vm import IF, RX_ADDR, enter_ns, expect, kernel, nic_state, send
from test_vm import setup_module  # noqa: F401  (the namespaces, this process in dmtB)


def refused(fn, name, what):
    with pytest.raises(dm.Error) as e:
        fn()
    assert e.value.errno == errno.EBADFD, e.value
    assert e.value.strerror == FORK_REFUSED % (name, what)


def receive_rest(rx, pos, total, sender):
    """The parent's side after the child: receive to the end of the stream
    from pos, every byte checked, all tokens back; the end position."""
    while True:
        with rx.recv() as f:
            if not f:
                break
            data = f.read()
            assert data == expect(pos, len(data)), "bad bytes at %d" % pos
            pos += len(data)
    assert pos == total and sender.wait(60) == 0
    rx.flush()
    assert rx.stats()["tokens_outstanding"] == 0
    return pos


@pytest.mark.skipif(kernel() < 616, reason="devmem TX needs Linux 6.16")
def test_fork_tx():
    """A parent with a send in flight forks: the child's send, wait and reap
    on its Tx and a Tx over its binding are refused; the child closes them;
    the parent's completion comes, and its binding sends on."""
    port, half = 6605, 1 << 16
    ls = socket.create_server((RX_ADDR, port))
    ls.settimeout(60)
    result = {}

    def child(c, tx, b, other):
        refused(lambda: tx.send([(0, 4096)]), "devmemtcp_tx_send", "TX handle")
        refused(lambda: tx.wait(0), "devmemtcp_tx_wait", "TX handle")
        refused(tx.reap, "devmemtcp_tx_reap", "TX handle")
        refused(lambda: dm.Tx(c, other, b), "devmemtcp_tx_new", "binding")
        assert tx.stats()["bytes_sent"] == half
        tx.close()
        b.close()

    def done(tx, n):
        while n:
            tx.wait(5000)
            n -= sum(d.len for d in tx.reap())

    def send_side():
        try:
            enter_ns("dmtA")
            with dm.Context() as c, dm.Buffer(c, 1 << 20) as buf, \
                    dm.Binding.tx(c, "dsim0", buf) as b, \
                    socket.socket() as s, socket.socket() as other:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"dsim0")
                s.connect((RX_ADDR, port))
                buf.write(0, expect(0, 2 * half))
                with dm.Tx(c, s, b) as tx:
                    assert tx.send([(0, half)]) == half
                    result["child"] = in_child(lambda: child(c, tx, b, other))
                    done(tx, half)
                    assert tx.send([(half, half)]) == half
                    done(tx, half)
                    result["stats"] = tx.stats()
        except BaseException as e:      # reported by the test's thread
            result["error"] = e

    th = threading.Thread(target=send_side, daemon=True)
    th.start()
    got = bytearray()
    conn, _ = ls.accept()
    ls.close()
    conn.settimeout(60)
    with conn:
        while True:
            b = conn.recv(1 << 20)
            if not b:
                break
            got += b
    th.join(60)
    if "error" in result:
        raise result["error"]
    assert result["child"] == "", result["child"]
    assert bytes(got) == expect(0, 2 * half)
    st = result["stats"]
    assert st["bytes_done"] == 2 * half and st["sends_in_flight"] == 0
    print("fork tx: the child's calls refused, the parent sent %d bytes after, checked"
          % len(got))


@pytest.mark.skipif(kernel() < 615, reason="io_uring zcrx needs Linux 6.15")
def test_fork_zcrx():
    """A parent receiving through a Zcrx forks: the child's wait on the
    Zcrx, its receive on the parent's Rx and an Rx of its own on the Zcrx
    are refused; closing them takes no time and releases nothing: the queue
    stays the parent's, which receives the whole stream."""
    from test_zcrx import QUEUE, BUF_SIZE, io_uring_queues
    port, total = 7106, 4 << 20
    flows = ["tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port)]
    with dm.Context() as ctx, dm.Nic(ctx, IF, queues=[QUEUE], flows=flows), \
            dm.Buffer(ctx, BUF_SIZE) as buf, dm.Zcrx(ctx, IF, QUEUE, buf) as z:
        ls = socket.create_server((RX_ADDR, port))
        sender = send(port, total)
        conn, _ = ls.accept()
        ls.close()
        with conn, dm.Rx(ctx, conn, zcrx=z) as rx:
            with rx.recv() as first:
                pos = len(first.read())
                assert first.read() == expect(0, pos)

                def child():
                    refused(lambda: z.wait(timeout=0), "devmemtcp_zcrx_wait", "zcrx handle")
                    refused(rx.recv, "devmemtcp_rx_recv", "receiver")
                    with socket.socket() as s:
                        refused(lambda: dm.Rx(ctx, s, zcrx=z), "devmemtcp_rx_new", "zcrx handle")
                    assert first.read() == expect(0, pos)
                    t0 = time.monotonic()
                    rx.close()
                    z.close()
                    assert time.monotonic() - t0 < 1.0

                out = in_child(child)
                assert out == "", out
                assert io_uring_queues(ctx) == [QUEUE]
                assert first.read() == expect(0, pos)
            pos = receive_rest(rx, pos, total, sender)
    print("fork zcrx: the child's calls refused, the parent received %d bytes, checked" % pos)


def test_fork_nic():
    """A parent holding a Nic (queue, flows, binding) and fragments of an Rx
    on it forks: the child's add_flow/remove_flow on the Nic and its
    recv/release on the Rx are refused; it closes them, and the NIC is as
    the parent set it up (the same probe, the binding on its queue); the
    parent receives the whole stream, removes its flow and closes, and the
    NIC is as before."""
    port, total = 6606, 8 << 20
    flow = "tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port)
    with dm.Context() as ctx:
        before = nic_state(ctx)
        with dm.Buffer(ctx, 16 << 20) as buf, \
                dm.Nic(ctx, IF, queues=[3], flows=[flow], buf=buf) as nic:
            extra = nic.add_flow("tcp4 dst-ip %s dst-port %d" % (RX_ADDR, port + 1))
            owned = nic_state(ctx)
            bound = [(q.id, q.dmabuf_id) for q in ctx.queues(IF) if q.dmabuf_id]
            assert bound == [(3, nic.binding_id)]
            ls = socket.create_server((RX_ADDR, port))
            sender = send(port, total, delay=0.5)
            conn, _ = ls.accept()
            ls.close()
            with conn, dm.Rx(ctx, conn, max_bytes=1 << 20) as rx:
                rx.add_buf(nic, buf)
                with rx.recv() as first:
                    pos = len(first.read())
                    assert first.read() == expect(0, pos)

                    def child():
                        refused(lambda: nic.add_flow("tcp4 dst-port 9"),
                                "devmemtcp_nic_add_flow", "NIC handle")
                        refused(lambda: nic.remove_flow(extra),
                                "devmemtcp_nic_remove_flow", "NIC handle")
                        refused(rx.recv, "devmemtcp_rx_recv", "receiver")
                        assert first.read() == expect(0, pos)
                        refused(first.release, "devmemtcp_rx_release", "receiver")
                        rx.close()
                        nic.close()
                        buf.close()

                    out = in_child(child)
                    assert out == "", out
                    assert nic_state(ctx) == owned
                    assert [(q.id, q.dmabuf_id) for q in ctx.queues(IF) if q.dmabuf_id] == bound
                pos = receive_rest(rx, pos, total, sender)
            nic.remove_flow(extra)
        assert nic_state(ctx) == before
        assert not [q for q in ctx.queues(IF) if q.dmabuf_id]
    print("fork nic: the child's calls refused, the NIC as the parent set it, "
          "%d bytes received after, checked" % pos)
