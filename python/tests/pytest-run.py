# SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
"""pytest for meson test: exit 77 (skip) when nothing ran because every
test skipped (no GPU, no PyTorch), so that the reason shows as a skip."""
import sys

import pytest


class Outcomes:
    ran = skipped = 0

    def pytest_terminal_summary(self, terminalreporter):
        st = terminalreporter.stats
        self.ran = len(st.get("passed", [])) + len(st.get("failed", [])) + len(st.get("error", []))
        self.skipped = len(st.get("skipped", []))


# guarded: a spawned process (multiprocessing's spawn start method, as a
# DataLoader's workers may use) imports this file again as __mp_main__
if __name__ == "__main__":
    o = Outcomes()
    rc = pytest.main(sys.argv[1:], plugins=[o])
    # 5: nothing collected (a module skipped as a whole)
    sys.exit(77 if rc in (0, 5) and not o.ran and o.skipped else int(rc))
