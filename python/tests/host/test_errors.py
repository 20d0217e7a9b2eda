# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Errors: devmemtcp.Error is an OSError carrying the library's errno and
message; bad arguments raise the usual Python exceptions."""

import errno
import os
import re
import socket
import struct
import time

import pytest

import devmemtcp as dm


def raises(eno, message, fn, *a, **kw):
    """fn raises devmemtcp.Error with this errno and a message matching
    the regular expression `message` entirely."""
    with pytest.raises(dm.Error) as e:
        fn(*a, **kw)
    err = e.value
    assert isinstance(err, OSError)
    assert err.errno == eno, err
    assert re.fullmatch(message, err.strerror), err.strerror
    assert str(err) == "[Errno %d] %s" % (eno, err.strerror)
    return err


def test_error_is_oserror():
    assert issubclass(dm.Error, OSError)
    e = dm.Error(errno.EINVAL, "msg")
    assert (e.errno, e.strerror) == (errno.EINVAL, "msg")


def test_rx_on_a_pipe(ctx):
    r, w = os.pipe()
    try:
        raises(errno.ENOTSOCK, r"devmemtcp_rx_new: fd \d+ is not a socket \(Socket operation on non-socket\): pass a connected TCP socket",
               dm.Rx, ctx, r)
    finally:
        os.close(r)
        os.close(w)


def test_rx_on_udp(ctx):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        raises(errno.EPROTOTYPE, r"devmemtcp_rx_new: fd \d+ is not a TCP socket \(a datagram socket\): devmem TCP needs a connected TCP socket \(IPv4 or IPv6\)",
               dm.Rx, ctx, u)


def test_rx_on_a_unix_stream(ctx):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        raises(errno.EPROTOTYPE, r"devmemtcp_rx_new: fd \d+ is not a TCP socket \(an AF_UNIX socket\): devmem TCP needs a connected TCP socket \(IPv4 or IPv6\)",
               dm.Rx, ctx, a)


def test_rx_on_unconnected_tcp(ctx):
    """A new socket and a listening one: the receiver takes the socket
    accept() returns."""
    with socket.socket() as s, socket.create_server(("127.0.0.1", 0)) as ls:
        for sock in (s, ls):
            raises(errno.ENOTCONN, r"devmemtcp_rx_new: fd \d+ is not connected \(Transport endpoint is not connected\): connect\(\) it first, or pass the socket accept\(\) returns",
                   dm.Rx, ctx, sock)


@pytest.mark.parametrize("env,level,printed", [
    (None, None, False),                # silent unless asked
    ("err", None, True),                # $DEVMEMTCP_LOG asks
    (None, "err", True),
    (None, dm.LOG_ERR, True),
    ("err", "none", False),             # 'none' whatever the environment says
    ("err", dm.LOG_NONE, False),
    ("err", dm.LOG_OFF, False),
])
def test_logging(monkeypatch, capfd, env, level, printed):
    if env:
        monkeypatch.setenv("DEVMEMTCP_LOG", env)
    else:
        monkeypatch.delenv("DEVMEMTCP_LOG", raising=False)
    with dm.Context(log_level=level) as c, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        e = raises(errno.EPROTOTYPE, r"devmemtcp_rx_new: fd \d+ is not a TCP socket .*", dm.Rx, c, u)
    assert capfd.readouterr() == ("", "devmemtcp: %s\n" % e.strerror if printed else "")


def test_nic_unknown_interface(ctx):
    raises(errno.ENODEV, r'no interface "nosuch0" in this network namespace \(see ip link show\)',
           dm.Nic, ctx, "nosuch0")


def test_nic_bad_flow(ctx):
    """The library's explanation of each refused flow (the message of the
    calling thread's last failed call without an object)."""
    for flow, why in (
            ("dst-port many", 'port "many" is not 1..65535'),
            ("tcp4 tcp4 dst-port 1", "tcp4 is given twice: give each word once"),
            ("dst-ip 10.0.0.0/0", "dst-ip 10.0.0.0/0 matches every address: "
             "leave dst-ip out, or give a prefix length of 1 or more")):
        raises(errno.EINVAL, re.escape('flow "%s": %s' % (flow, why)),
               dm.Nic, ctx, "lo", flows=["tcp4 dst-port 5201", flow])
    with pytest.raises(TypeError, match="^flows is a list of strings"):
        dm.Nic(ctx, "lo", flows="tcp4 dst-port 1")


def test_nic_on_loopback(ctx, tmp_path):
    # a run directory of the test's own: the machine's may be refused
    # (another owner's, or writable by others)
    tmp_path.chmod(0o700)
    raises(errno.EINVAL, re.escape("lo: all 1 RX queues would be devmem queues, leaving none for other traffic: use fewer queues or add channels with ethtool -L"),
           dm.Nic, ctx, "lo", run_dir=str(tmp_path))


def test_bind_rx_on_loopback(ctx, hostmem):
    raises(errno.EOPNOTSUPP, re.escape("bind-rx on lo failed: the driver of lo does not support devmem TCP (it lacks the queue management API / unreadable netmem), or the kernel predates bind-rx (Linux 6.12)"),
           dm.Binding.rx, ctx, "lo", [0], hostmem.buf)


def test_interface_index_and_name(ctx, hostmem):
    raises(errno.ENODEV, "no network interface named nosuch0", dm.Binding.rx, ctx, "nosuch0", 0, hostmem.buf)
    with pytest.raises(ValueError, match="^no network interface with index 99999$"):
        ctx.queues(99999)


def test_import_without_fd(ctx):
    raises(errno.EBADF, "import: opts.fd -1 is not a dma-buf fd: pass the fd your exporter gave you",
           dm.Buffer, ctx, 4096, "import")


def test_import_needs_a_dmabuf(ctx, monkeypatch):
    """Without the test build's stand-in a memfd is refused, and a size
    beyond the dma-buf's end is refused with it (the pipe is not seekable:
    only the kind of file is checked)."""
    from devmemtcp import _testing
    fd = _testing.dmabuf_stand_in(8192)
    r, w = os.pipe()
    try:
        raises(errno.EINVAL, r"import: opts.size 12288 is larger than the dma-buf \(8192 bytes\): pass its size \(lseek\(fd, 0, SEEK_END\) gives it\)",
               dm.Buffer, ctx, 12288, "import", fd=fd, keep_fd=True)
        with dm.Buffer(ctx, 8192, "import", fd=fd, keep_fd=True) as b:
            assert b.size == 8192
        monkeypatch.delenv("DEVMEMTCP_TEST_DMABUF_MEMFD")
        for f in (fd, r):
            raises(errno.EINVAL, re.escape("import: opts.fd %d is not a dma-buf: pass the fd your exporter gave you (cuMemGetHandleForAddressRange, drmPrimeHandleToFD, UDMABUF_CREATE)" % f),
                   dm.Buffer, ctx, 4096, "import", fd=f, keep_fd=True)
    finally:
        for f in (fd, r, w):
            os.close(f)


def test_import_segment_outside(ctx, hostmem):
    raises(errno.EINVAL, re.escape("segment [0, +0x2000) is empty or outside the 4096-byte dma-buf: every segment must lie inside the buffer"),
           dm.Buffer, ctx, 4096, "import", fd=hostmem.fd, keep_fd=True, segments=[(0, 8192, 0)])


def test_drm_node_missing(ctx):
    # the build's answer (another test's import may map libdrm.so here)
    from devmemtcp import _testing_config
    if not _testing_config.HAVE_LIBDRM:
        raises(errno.EOPNOTSUPP, re.escape("drm: libdevmemtcp %s was built without libdrm: install libdrm-dev and rebuild" % dm.version()),
               dm.Buffer, ctx, 4096, "drm", drm_path="/nonexistent/card0")
        return
    raises(errno.ENOENT, re.escape("drm: /nonexistent/card0 does not exist: load the device's DRM driver ('modprobe vgem' for a virtual one, kernel option CONFIG_DRM_VGEM) or name another node in opts.drm_path"),
           dm.Buffer, ctx, 4096, "drm", drm_path="/nonexistent/card0")


@pytest.mark.skipif(os.path.exists("/dev/udmabuf"), reason="this machine has /dev/udmabuf")
def test_udmabuf_missing(ctx):
    raises(errno.ENOENT, re.escape("udmabuf: /dev/udmabuf does not exist: load the module with 'modprobe udmabuf' (kernel option CONFIG_UDMABUF)"),
           dm.Buffer, ctx, 1 << 20)


def test_host_read_of_device_memory(ctx, hostmem):
    raises(errno.EOPNOTSUPP, re.escape("devmemtcp_buf_read: the buffer is device memory (provider 2), which the CPU cannot read: copy it on the device instead"),
           hostmem.buf.read, 0, 16)


def test_addr_out_of_range(hostmem):
    raises(errno.ERANGE, r"Buffer.addr: the offset is in no segment of the buffer",
           hostmem.buf.addr, hostmem.size)


def test_timeout_and_nonblocking(rx, conn):
    e = raises(errno.ETIMEDOUT, r"Rx.recv: no data within the timeout", rx.recv, timeout=0.05)
    assert isinstance(e, TimeoutError) and isinstance(e, dm.TimeoutError)
    conn.server.setblocking(False)   # the flag is the socket's, shared by the dup
    raises(errno.EAGAIN, r"Rx.recv: the socket is non-blocking and has no data", rx.recv)
    conn.server.setblocking(True)


def test_socket_timeout_is_honoured(rx, conn, fake):
    """settimeout() makes the descriptor non-blocking underneath: the
    receive waits for the socket's timeout, then raises TimeoutError."""
    conn.server.settimeout(0.3)
    t0 = time.monotonic()
    e = raises(errno.ETIMEDOUT, re.escape("Rx.recv: no data within the socket's timeout (settimeout())"),
               rx.recv)
    waited = time.monotonic() - t0
    assert isinstance(e, TimeoutError) and isinstance(e, dm.TimeoutError)
    assert 0.25 <= waited < 3, waited
    # data within the timeout is received
    fake.push(rx, [(0, 4096)])
    with rx.recv() as f:
        assert f.nbytes == 4096
    # recv(timeout=) wins over the socket's
    t0 = time.monotonic()
    raises(errno.ETIMEDOUT, r"Rx.recv: no data within the timeout", rx.recv, timeout=0.05)
    assert time.monotonic() - t0 < 0.25
    conn.server.settimeout(0.0)      # non-blocking: no wait
    raises(errno.EAGAIN, r"Rx.recv: the socket is non-blocking and has no data", rx.recv)
    conn.server.settimeout(None)


def test_so_rcvtimeo_is_a_timeout(rx, conn):
    conn.server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                           struct.pack("ll", 0, 100000))
    e = raises(errno.ETIMEDOUT, re.escape("Rx.recv: no data within the socket's SO_RCVTIMEO"),
               rx.recv)
    assert isinstance(e, TimeoutError)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_nic_without_privilege_or_broker(tmp_path):
    """Without CAP_NET_ADMIN and without a broker the message names both
    ways out (a child that became nobody)."""
    tmp_path.chmod(0o700)          # root's: nobody cannot open it
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.environ["DEVMEMTCP_BROKER_SOCKET"] = str(tmp_path / "no-broker.sock")
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            with dm.Context() as c:
                try:
                    dm.Nic(c, "lo", run_dir=str(tmp_path))
                except dm.Error as err:
                    os.write(w, ("%d %s" % (err.errno, err.strerror)).encode())
                    code = 0
        finally:
            os._exit(code)
    os.close(w)
    got = b""
    while chunk := os.read(r, 4096):
        got += chunk
    os.close(r)
    assert os.waitpid(pid, 0)[1] == 0
    eno, msg = got.decode().split(" ", 1)
    # ERRORS devmemtcp_nic_open EPERM
    assert int(eno) == errno.EPERM
    assert msg == (
        "devmemtcp_nic_open on lo: no CAP_NET_ADMIN and no broker: start devmemtcp-broker "
        "(systemctl start devmemtcp-broker.socket; its socket is %s) or run with CAP_NET_ADMIN "
        "(cannot open the run directory %s (the run_dir option): Permission denied (use a "
        "directory this user can write and others cannot, or pass another run_dir))"
        % (tmp_path / "no-broker.sock", tmp_path)), msg


def test_argument_errors(ctx, rx, hostmem):
    for bad in ("loud", -2, 8):
        with pytest.raises(ValueError, match="^log_level is one of 'none', 'err', 'warn', 'info', 'debug' or a LOG_\\* number$"):
            dm.Context(log_level=bad)
    with pytest.raises(ValueError, match="^provider is 'udmabuf', 'import', 'cuda', 'drm' or a PROVIDER_\\* number$"):
        dm.Buffer(ctx, 4096, "gpu")
    with pytest.raises(ValueError, match="^max_bytes must be between 1 and 2\\*\\*31 - 1$"):
        rx.recv(max_bytes=0)
    with pytest.raises(ValueError, match="^max_frags must be between 1 and 2\\*\\*31 - 1$"):
        rx.recv(None, 0)
    with pytest.raises(ValueError, match="^timeout must be None or >= 0 seconds$"):
        rx.recv(timeout=-1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bytes'"):
        rx.recv(bytes=1)
    with pytest.raises(ValueError, match="^max_frags and max_bytes must be between 1 and 2\\*\\*31 - 1$"):
        dm.Rx(ctx, 0, max_frags=0)
    with pytest.raises(TypeError, match="^expected a devmemtcp.Context, got str$"):
        dm.Rx("ctx", 0)
    with pytest.raises(TypeError, match="^expected a devmemtcp.Buffer, got int$"):
        rx.add_buf(1, 2)
    with pytest.raises(TypeError, match="^gpu must be an open devmemtcp.Gpu$"):
        dm.Rx(ctx, 0, gpu=1)
    with pytest.raises(TypeError, match="^binding must be a devmemtcp.Binding made by Binding.tx\\(\\)$"):
        dm.Tx(ctx, 0, hostmem.buf)
    with pytest.raises(TypeError, match="^dl_device is a \\(device_type, device_id\\) tuple"):
        dm.Buffer(ctx, 4096, "import", fd=hostmem.fd, keep_fd=True, dl_device="cpu")


def test_register_twice(rx, hostmem):
    from conftest import BINDING
    raises(errno.EEXIST, "devmemtcp_rx_add_buf: binding %d is already registered" % BINDING,
           rx.add_buf, BINDING, hostmem.buf)


def test_gather_stream_argument(rx, fake):
    import numpy as np
    fake.push(rx, [(0, 4096)])
    with rx.recv() as f:
        with pytest.raises(TypeError, match="^stream must be None, an int"):
            f.gather_into(np.zeros(4096, np.uint8), stream="s")
        with pytest.raises(ValueError, match="^a stream handle is not negative$"):
            f.gather_into(np.zeros(4096, np.uint8), stream=-3)
