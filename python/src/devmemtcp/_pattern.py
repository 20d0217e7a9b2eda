# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""The stream pattern of the tests (test builds only, never installed).

Byte i of a test stream is i % PERIOD, as tests/lib/pattern.h defines it
for C ('devmemtcp send', the harness, the emulated NIC).  The one Python
definition: the suite's fake kernel (_testing), the vm tests and the
emulated NIC's tools import it.  It imports nothing, so a process without
the fake kernel can use it.
"""

PERIOD = 251


def pattern(pos, n):
    """n bytes of the stream pattern from stream position pos."""
    start = pos % PERIOD
    reps = (start + n) // PERIOD + 1
    return (bytes(range(PERIOD)) * reps)[start:start + n]
