"""qharness adapter for torchao: its MX cast and MX linear, run through the harness's suites."""

from importlib.metadata import version

ENGINE = f"torchao {version('torchao')}"
