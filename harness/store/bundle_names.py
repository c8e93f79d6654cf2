"""Repro bundle file names, apart from the bundles' tensors: a report that links a failure to
its bundle needs the name, not torch (`harness.store.repro` holds the bundles).

File names come from the test id with every character outside ``[A-Za-z0-9._-]`` replaced,
so they are safe on any file system.
"""

from __future__ import annotations

import hashlib
import re

SUFFIX = ".safetensors"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def bundle_filename(nodeid: str) -> str:
    """``suites/test_linear.py::test_linear[a-b]`` -> ``test_linear-a-b-<hash>.safetensors``."""
    name = nodeid.rsplit("::", 1)[-1]
    digest = hashlib.sha256(nodeid.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('-', name).strip('-')[:150]}-{digest}{SUFFIX}"
