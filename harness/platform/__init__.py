"""Where we run: device detection (`info`) and capability probes with per-arch
expectations (`capabilities`)."""

from harness.platform.info import PlatformInfo, detect

__all__ = ["PlatformInfo", "detect"]
