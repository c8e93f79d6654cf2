"""Shared set-up of the finding scripts: vLLM's CPU build with the real Triton, interpreted.

vLLM's CPU build keeps Triton only when ``triton.backends.backends`` has a "cpu" entry
(``vllm/triton_utils/importing.py``); the interpreter needs no backend, so a placeholder
entry is present while ``vllm.triton_utils`` is first imported. Imports only triton and vllm.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from types import SimpleNamespace

import triton.backends

triton.backends.backends["cpu"] = SimpleNamespace(driver=None, compiler=None)
try:
    import vllm.triton_utils
finally:
    del triton.backends.backends["cpu"]
assert vllm.triton_utils.HAS_TRITON
