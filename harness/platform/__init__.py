"""Where we run: device detection (`info`) and capability probes with per-arch
expectations (`capabilities`).

`PlatformInfo` and `detect` are imported on first use (PEP 562), so a module that needs
only the platform's names (`simulate.key_of`: a report over results files) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.platform.info import PlatformInfo, detect

__all__ = ["PlatformInfo", "detect"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from harness.platform import info

        return getattr(info, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
