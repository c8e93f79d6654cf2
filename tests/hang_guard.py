"""The one time limit the self-tests put on a child process: a hang guard, never a speed test.

A child pytest that takes ten minutes on a runner loaded to 15 on two cores is slow, not
broken; a fixed 600 s limit once turned that into a red selftest. So every child gets the
same generous limit, there only to turn a child that never ends into a failure before CI's
own limit ends the whole job. ``QHARNESS_TEST_HANG_GUARD_S`` sets it for runners slower
still; ``tests/test_codebase_rules.py`` refuses any other literal limit on a child.
"""

from __future__ import annotations

import os

HANG_GUARD_S: float = float(os.environ.get("QHARNESS_TEST_HANG_GUARD_S", "2400"))
