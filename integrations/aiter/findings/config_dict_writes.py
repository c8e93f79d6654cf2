"""aiter gemm_a8wfp4 and gemm_afp4wfp4: which calls write into the tuned config dicts the
shapes share, and what each kernel is then launched with. Standalone: aiter's Triton
modules, triton and torch only; no kernel runs (the launches are recorded, not executed).

Run: TRITON_INTERPRET=1 python config_dict_writes.py   (TRITON_INTERPRET only makes aiter's
modules importable without ROCm here; on a gfx950 GPU run it as is).

gemm_a8wfp4: `_get_config` (functools.lru_cache) returns the dict of the M range from the
loaded JSON itself, after writing into it: SPLITK_BLOCK_SIZE, BLOCK_SIZE_K and NUM_KSPLIT
from `_get_splitk(K, ...)` for M <= 128, SPLITK_BLOCK_SIZE = 2 * K for M > 128. A cache
miss rewrites the fields for its own K before returning, which is what keeps the first
call of every shape right; a cache hit returns the shared dict as the last miss of the M
range left it; later misses also start from BLOCK_SIZE_K and NUM_KSPLIT as earlier
misses lowered them. gemm_afp4wfp4: the wrapper `gemm_afp4wfp4` writes SPLITK_BLOCK_SIZE
(2 * K, or `get_splitk`'s) and, for split-K, BLOCK_SIZE_K and NUM_KSPLIT into the dict
`_get_config` returns, on every call (into a caller's `config=` dict too). What saves it:
its `_get_config` (also lru-cached) reloads the JSON on every cache miss (its test
`hasattr(_get_config._config_dict, "default")` asks a dict for an attribute, which is never
there), so every (M, N, K) gets a dict of its own; the wrapper's writes stay with that
shape, whose later calls recompute the split from the same K (K stays covered).
"""

import importlib.util
import os
import sys
import types

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # aiter/__init__ probes for ROCm: load the Triton kernels without it
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    for name, path in (("aiter", root), ("aiter.ops", os.path.join(root, "ops"))):
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    import aiter.ops.triton.utils._triton.arch_info as arch_info

    arch_info.get_arch = lambda: "gfx950"
import aiter.ops.triton.gemm_a8wfp4 as a8wfp4  # noqa: E402
import aiter.ops.triton.gemm_afp4wfp4 as afp4wfp4  # noqa: E402

FIELDS = ("BLOCK_SIZE_K", "NUM_KSPLIT", "SPLITK_BLOCK_SIZE")
launches: list[dict] = []


class Recorder:
    """Stands in for a Triton kernel: `kernel[grid](...)` records the launch's config."""

    def __getitem__(self, grid):  # type: ignore[no-untyped-def]
        def launch(*args, **kwargs):  # type: ignore[no-untyped-def]
            launches.append({f: kwargs[f] for f in FIELDS if f in kwargs})

        return launch


for module in (a8wfp4, afp4wfp4):
    for attr in dir(module):
        if attr.startswith("_gemm_") and attr.endswith("_kernel"):
            setattr(module, attr, Recorder())


def last_launch() -> dict:
    return next(c for c in reversed(launches) if "NUM_KSPLIT" in c)  # not the reduce's


def a8wfp4_call(m: int, n: int, k: int) -> dict:
    x = torch.zeros(m, k, dtype=torch.float8_e4m3fn)
    w = torch.zeros(n, k // 2, dtype=torch.uint8)
    w_scales = torch.full((n, k // 32), 127, dtype=torch.uint8)
    a8wfp4.gemm_a8wfp4(x, w, torch.empty(m, n), torch.ones(m, 1), w_scales, torch.float32)
    return last_launch()


def afp4wfp4_call(m: int, n: int, k: int) -> dict:
    x = torch.zeros(m, k // 2, dtype=torch.uint8)
    w = torch.zeros(n, k // 2, dtype=torch.uint8)
    s = torch.full((max(m, n), -(-k // 32)), 127, dtype=torch.uint8)
    afp4wfp4.gemm_afp4wfp4(x, w, s[:m], s[:n], torch.float32)
    return last_launch()


def covered(cfg: dict, k: int) -> int:
    """K elements the a8wfp4 kernel's pieces reach: NUM_KSPLIT pieces of SPLITK_BLOCK_SIZE."""
    return min(k, cfg["NUM_KSPLIT"] * cfg["SPLITK_BLOCK_SIZE"])


def shared(get_config, m: int, n: int, k: int) -> dict:  # type: ignore[no-untyped-def]
    return {f: get_config(m, n, k).get(f) for f in FIELDS}


print("gemm_a8wfp4 (_get_config is lru-cached and writes into the shared dict):")
for m in (8, 256):
    first = a8wfp4_call(m, 64, 4096)
    print(f"  M={m:3} K=4096 first call: launched with {first}, reaches "
          f"{covered(first, 4096)} of 4096 K elements")  # fmt: skip
    a8wfp4_call(m, 64, 512)
    again = a8wfp4_call(m, 64, 4096)
    print(f"  M={m:3} K=4096 after a K=512 call (cache hit): launched with {again}, reaches "
          f"{covered(again, 4096)} of 4096 K elements")  # fmt: skip

print(
    "  one dict for two shapes of an M range: _get_config(8, 64, 4096) is _get_config(8, 64, 512):",
    a8wfp4._get_config(8, 64, 4096) is a8wfp4._get_config(8, 64, 512),
)
print("gemm_afp4wfp4 (lru-cached too; the wrapper writes into the dict _get_config returns):")
print(
    "  one dict per shape: _get_config(8, 48, 88) is _get_config(8, 48, 2048):",
    afp4wfp4._get_config(8, 48, 88) is afp4wfp4._get_config(8, 48, 2048),
    "| the same shape again:",
    afp4wfp4._get_config(8, 48, 88) is afp4wfp4._get_config(8, 48, 88),
)
print(f"  M=8 K=176 launched with {afp4wfp4_call(8, 48, 176)}")
print(f"  M=8 K=4096 launched with {afp4wfp4_call(8, 48, 4096)}")
print(f"  M=8 K=176 again launched with {afp4wfp4_call(8, 48, 176)}")
mine = {**afp4wfp4._get_config(8, 48, 88), "NUM_KSPLIT": 4, "BLOCK_SIZE_K": 256}
x = torch.zeros(8, 88, dtype=torch.uint8)
w = torch.zeros(48, 88, dtype=torch.uint8)
s = torch.full((48, 6), 127, dtype=torch.uint8)
afp4wfp4.gemm_afp4wfp4(x, w, s[:8], s, torch.float32, config=mine)
print(f"  a caller's config= dict (NUM_KSPLIT 4) after a K=176 call: "
      f"{ {f: mine.get(f) for f in FIELDS} }")  # fmt: skip
