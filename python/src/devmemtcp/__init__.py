# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Receive TCP payload straight into GPU (or other device) memory with Linux
Device Memory TCP, and hand it to PyTorch, CuPy or JAX without a copy.

A minimal receiver::

    import devmemtcp as dm

    with dm.Context() as ctx, \\
         dm.Buffer(ctx, 64 << 20, "cuda", device=0) as buf, \\
         dm.Nic(ctx, "eth1", flows=["tcp4 dst-port 5201"], buf=buf) as nic, \\
         dm.Rx(ctx, conn) as rx:
        rx.add_buf(nic, buf)
        while frags := rx.recv():
            frags.gather_into(tensor[:frags.nbytes], stream)   # tokens go back after the copy

Objects mirror the library's handles (Context, Buffer, Binding, Nic, Rx, Tx,
Gpu); each is a context manager and closes deterministically.  Errors raise
:class:`Error`, an :class:`OSError` carrying the errno and the library's
message, which names what to fix.  Blocking calls release the GIL.

See ``help(devmemtcp.Rx.recv)``, ``help(devmemtcp.Fragments)`` and the
devmemtcp(7) manual page.
"""

from ._devmemtcp import (  # noqa: F401
    Binding,
    Buffer,
    Context,
    Error,
    Fragment,
    Fragments,
    Gpu,
    Nic,
    Queue,
    Rx,
    TimeoutError,
    Tx,
    TxDone,
    Zcrx,
    version,
    FRAG_FOREIGN,
    FRAG_LINEAR,
    PCI_OTHER,
    PCI_SAME_NUMA,
    PCI_SAME_ROOT_PORT,
    PCI_SAME_SWITCH,
    LOG_DEBUG,
    LOG_ERR,
    LOG_INFO,
    LOG_NONE,
    LOG_OFF,
    LOG_WARN,
    PROVIDER_CUDA,
    PROVIDER_DRM,
    PROVIDER_IMPORT,
    PROVIDER_UDMABUF,
    QUEUE_RX,
    QUEUE_TX,
    RELEASE_ANY_THREAD,
    TX_DONE_COPIED,
    kDLCPU,
    kDLCUDA,
)

from ._version import __version__  # noqa: F401

__all__ = [
    "Binding", "Buffer", "Context", "Error", "Fragment", "Fragments", "Gpu",
    "Nic", "Queue", "Rx", "TimeoutError", "Tx", "TxDone", "Zcrx", "version",
    "FRAG_FOREIGN", "FRAG_LINEAR", "PCI_OTHER", "PCI_SAME_NUMA",
    "PCI_SAME_ROOT_PORT", "PCI_SAME_SWITCH", "LOG_DEBUG", "LOG_ERR", "LOG_INFO",
    "LOG_NONE", "LOG_OFF", "LOG_WARN", "PROVIDER_CUDA", "PROVIDER_DRM", "PROVIDER_IMPORT",
    "PROVIDER_UDMABUF", "QUEUE_RX", "QUEUE_TX", "RELEASE_ANY_THREAD",
    "TX_DONE_COPIED", "kDLCPU", "kDLCUDA",
]
