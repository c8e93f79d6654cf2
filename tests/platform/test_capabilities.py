"""Capability probes turn failing or wrong ops into recorded, explained unavailability."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from harness.platform import capabilities
from harness.platform.info import detect


@pytest.fixture
def scratch_probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, capabilities.Probe]]:
    """An isolated probe registry, with the per-process cache cleared around the test."""
    registry: dict[str, capabilities.Probe] = {}
    monkeypatch.setattr(capabilities, "PROBES", registry)
    capabilities.probe_all.cache_clear()
    yield registry
    capabilities.probe_all.cache_clear()


def test_raising_and_wrong_ops_are_unavailable_with_reasons(scratch_probes) -> None:
    @capabilities.probe("works")
    def _works(device: torch.device) -> None:
        capabilities._check(torch.ones(2, device=device), torch.ones(2))

    @capabilities.probe("raises")
    def _raises(device: torch.device) -> None:
        raise RuntimeError("no kernel image is available for execution on the device\nmore")

    @capabilities.probe("wrong")
    def _wrong(device: torch.device) -> None:
        capabilities._check(torch.full((2,), 3.0), torch.full((2,), 2.0))

    found = capabilities.probe_all("cpu")
    assert found["works"].available
    assert not found["raises"].available
    assert (
        found["raises"].detail
        == "RuntimeError: no kernel image is available for execution on the device"
    )
    assert not found["wrong"].available
    assert "wrong result" in found["wrong"].detail


def test_probes_run_once_per_process(scratch_probes) -> None:
    calls: list[str] = []

    @capabilities.probe("counted")
    def _counted(device: torch.device) -> None:
        calls.append(str(device))

    capabilities.probe_all("cpu")
    capabilities.probe_all("cpu")
    assert calls == ["cpu"]


def test_duplicate_probe_names_are_refused(scratch_probes) -> None:
    capabilities.probe("twice")(lambda device: None)
    with pytest.raises(ValueError, match="registered twice"):
        capabilities.probe("twice")(lambda device: None)


def test_unknown_capability_is_an_error() -> None:
    with pytest.raises(KeyError, match="unknown capability"):
        capabilities.has(detect(), "scaled_mm.nonexistent")


def test_fp8_probe_answer_is_independent_of_torch_decoding() -> None:
    # The probes compare against small-integer products computed without any FP8 decoding.
    assert torch.equal(capabilities._PROBE_PRODUCT, capabilities._PROBE_PRODUCT.round())
    assert capabilities._PROBE_PRODUCT.abs().max() < 256  # exact in bf16


def test_cpu_expectations_follow_the_kernel_torch_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # aten's CPU _scaled_mm runs oneDNN when mkldnn is enabled on an AMX-INT8 CPU, else its
    # reference kernel; only the reference kernel takes e4m3fnuz, so only it is held to it.
    cpu = detect()
    fnuz = "scaled_mm.tensorwise.e4m3fnuz"
    with torch.backends.mkldnn.flags(enabled=False):
        assert capabilities.cpu_scaled_mm_kernel() == "reference"
        assert capabilities.expected_key(cpu) == "cpu"
        assert fnuz in capabilities.expected(cpu)
        capabilities.PROBES[fnuz](torch.device("cpu"))  # the reference kernel does run it
    if torch.backends.mkldnn.is_available():
        flags = {**torch.cpu.get_capabilities(), "amx_int8": True}
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: flags)
        with torch.backends.mkldnn.flags(enabled=True):
            assert capabilities.expected_key(cpu) == "cpu+onednn"
            assert fnuz not in capabilities.expected(cpu)
            assert "scaled_mm.tensorwise.e4m3fn" in capabilities.expected(cpu)
