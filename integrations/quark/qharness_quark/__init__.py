"""qharness adapter for AMD Quark: its OCP MX quantizer, run through the harness's suites."""

from importlib.metadata import version

ENGINE = f"amd-quark {version('amd-quark')}"
