#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""Copy man pages into the build tree as they are installed: the .TH line's
source field gets the project's version ("libdevmemtcp X.Y.Z"), and the
broker's policy path the configured sysconfdir.

usage: configure-man.py VERSION SYSCONFDIR OUTDIR PAGE...
"""
import os
import re
import sys


def main(argv):
    version, sysconfdir, outdir, pages = argv[1], argv[2], argv[3], argv[4:]
    for page in pages:
        text = open(page).read()
        text, n = re.subn(r'^(\.TH \S+ \S+ \S+ )"libdevmemtcp"', r'\1"libdevmemtcp %s"' % version,
                          text, count=1, flags=re.M)
        if n != 1:
            sys.exit('%s: no .TH line with the source "libdevmemtcp"' % page)
        text = text.replace("/etc/devmemtcp/broker.conf",
                            sysconfdir.rstrip("/") + "/devmemtcp/broker.conf")
        with open(os.path.join(outdir, os.path.basename(page)), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
