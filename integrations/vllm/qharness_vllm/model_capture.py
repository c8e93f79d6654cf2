"""Run a real checkpoint through vLLM on this CPU and capture what every quantized layer did.

    python -m qharness_vllm.model_capture CHECKPOINT_DIR OUTPUT_FILE PROMPTS_JSON [--inject BUG]

One in-process engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) loads the folder with vLLM's
own loader (``LLM(model=..., skip_tokenizer_init=True)``), then, through
``LLM.apply_model``, forward hooks go on every module vLLM built with a quantized linear or
MoE method. Each prompt (token ids) is run as one prefill (``max_tokens=1``), so each hook
call is one prompt's tokens. Written to OUTPUT_FILE (``torch.save``; plain dicts of tensors,
strings and numbers, loadable with ``weights_only=True``):

- ``linears[name]``: every linear and MoE layer vLLM built, quantized or not: its method
  class, whether it is quantized, and an unquantized layer's weight as loaded, before the
  CPU build packs it (the layer selection);
- ``layers[name]``: the quant method and kernel classes, every parameter after
  ``process_weights_after_loading`` (as vLLM holds it), the logical shard widths, and per
  prompt the layer's input and output;
- ``hidden``: per prompt, the final norm's output; ``lm_head``: its weight (logits are
  ``hidden @ lm_head.T``, computed by the caller in float64);
- ``param_bytes`` / ``buffer_bytes``: bytes of the model's parameters and of its buffers
  (rotary caches and the like) as loaded;
- ``error``: vLLM's exception text, when loading or running failed (a counted refusal).

The quant ops the CPU build declares without a kernel are bound for the whole run
(`qharness_vllm.platform.cpu_fp8_ops`; ``bound_ops``), and fused activation-quant producers
whose op the build lacks are taken out of vLLM's table, so its own unfused path runs
(`cpu_unfused_act_quant`; ``workarounds`` lists what was done, with the finding).
``--inject`` puts one seed bug class into vLLM's loading path (`INJECTIONS`), for the
suite's self-test.

Run it as a script or through `capture`: the engine must be the main module's (spawn guard).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch

ENGINE_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "TOKENIZERS_PARALLELISM": "false",
}
MAX_MODEL_LEN = 128

_CALLS: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
_HIDDEN: list[torch.Tensor] = []


def _first(value: Any) -> torch.Tensor:
    return value[0] if isinstance(value, tuple) else value


def _is_quantized(module: torch.nn.Module) -> bool:
    """A linear or MoE layer vLLM built with a quantized method (attention layers carry a
    KV-cache ``quant_method`` too; they are not weights)."""
    from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod

    method = getattr(module, "quant_method", None)
    if method is None or isinstance(method, UnquantizedLinearMethod):
        return False
    return isinstance(module, LinearBase) or module_is_moe(module)


def _is_layer(module: torch.nn.Module) -> bool:
    """A linear or MoE layer vLLM built, quantized or not (what a layer selection decides)."""
    from vllm.model_executor.layers.fused_moe import FusedMoEMethodBase
    from vllm.model_executor.layers.linear import LinearBase

    method = getattr(module, "quant_method", None)
    return isinstance(module, LinearBase) or isinstance(method, FusedMoEMethodBase)


def _built(module: torch.nn.Module) -> dict[str, Any]:
    """How vLLM built a layer: its method, whether quantized, and for an unquantized one its
    weight (to hold to the checkpoint's model-dtype tensor)."""
    quantized = _is_quantized(module)
    weight = getattr(module, LOADED_WEIGHT, None)
    return {
        "method_class": type(getattr(module, "quant_method", None)).__name__,
        "quantized": quantized,
        "weight": None if quantized or weight is None else weight,
    }


LOADED_WEIGHT = "_qharness_loaded_weight"


def _keep_loaded_weight(layer: torch.nn.Module) -> None:
    setattr(layer, LOADED_WEIGHT, layer.weight.detach().clone())


def keep_unquantized_weights() -> AbstractContextManager[None]:
    """Keep each unquantized linear's weight as vLLM loaded it: the CPU build then packs it
    for its GEMM and leaves ``layer.weight`` empty (``dispatch_cpu_unquantized_gemm``)."""
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod

    return _before_processing(UnquantizedLinearMethod, _keep_loaded_weight)


def _tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = {n: p.detach().clone() for n, p in module.named_parameters(recurse=False)}
    out |= {n: b.detach().clone() for n, b in module.named_buffers(recurse=False)}
    return out


def _describe(module: torch.nn.Module) -> dict[str, Any]:
    method = module.quant_method  # type: ignore[attr-defined]
    scheme = getattr(module, "scheme", None)
    kernel = getattr(scheme, "fp8_linear", None) or getattr(scheme, "kernel", None)
    widths = getattr(module, "logical_widths", None) or getattr(
        module, "output_partition_sizes", None
    )
    return {
        "module_class": type(module).__name__,
        "method_class": type(method).__name__,
        "scheme_class": type(scheme).__name__ if scheme is not None else "",
        "kernel_class": type(kernel).__name__ if kernel is not None else "",
        "logical_widths": [int(w) for w in widths] if widths else [],
        # vLLM tags the weight with its K axis (0 after the FP8 helpers transpose it)
        "weight_input_dim": _input_dim(module.weight, type(scheme).__name__),
        "tensors": _tensors(module),
    }


# vLLM schemes that transpose the weight after loading without tagging its K axis: scheme
# class -> the axis K is then on. QuarkW8A8Fp8 (quark/schemes/quark_w8a8_fp8.py) sets
# ``layer.weight = Parameter(weight.t())`` on every path, where compressed-tensors' FP8
# scheme sets ``layer.weight.input_dim = 0`` after the same transpose.
UNTAGGED_INPUT_DIM: dict[str, int] = {"QuarkW8A8Fp8": 0}


def _input_dim(weight: torch.Tensor, scheme: str) -> int:
    """The runtime weight's K axis: vLLM's tag, else the table's axis for the scheme, else 1
    (the layout of a weight vLLM did not transpose)."""
    tag = getattr(weight, "input_dim", None)
    return int(tag) if tag is not None else UNTAGGED_INPUT_DIM.get(scheme, 1)


def install_hooks(model: torch.nn.Module) -> dict[str, Any]:
    """Hooks on every quantized linear / MoE module and the final norm; their state now."""
    layers: dict[str, Any] = {}
    linears = {name: _built(m) for name, m in model.named_modules() if _is_layer(m)}
    for name, module in model.named_modules():
        if not _is_quantized(module):
            continue
        layers[name] = _describe(module)
        _CALLS[name] = []

        def hook(mod: torch.nn.Module, args: tuple[Any, ...], out: Any, key: str = name) -> None:
            x = args[0]
            if module_is_moe(mod) and len(args) > 1:
                x = (args[0], args[1])  # hidden states and router logits
            _CALLS[key].append((_clone(x), _clone(_first(out))))

        module.register_forward_hook(hook)
    norm = _final_norm(model)
    norm.register_forward_hook(lambda m, a, out: _HIDDEN.append(_first(out).detach().clone()))
    head = _lm_head(model)
    return {
        "layers": layers,
        "linears": linears,
        "lm_head": head.weight.detach().clone(),
        "param_bytes": _bytes(model.parameters()),
        "buffer_bytes": _bytes(model.buffers()),
        "param_names": [n for n, _ in model.named_parameters()],
    }


def _bytes(tensors: Iterator[torch.Tensor]) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors))


def module_is_moe(module: torch.nn.Module) -> bool:
    """A MoE layer with a quantized method (vLLM's MoE methods share one base)."""
    from vllm.model_executor.layers.fused_moe import FusedMoEMethodBase

    method = getattr(module, "quant_method", None)
    return isinstance(method, FusedMoEMethodBase) and type(method).__name__ not in UNQUANTIZED_MOE


UNQUANTIZED_MOE = frozenset({"UnquantizedFusedMoEMethod"})


def _clone(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_clone(t) for t in x)
    return x.detach().clone()


def _final_norm(model: torch.nn.Module) -> torch.nn.Module:
    inner = getattr(model, "model", model)
    return inner.norm  # type: ignore[no-any-return]


def _lm_head(model: torch.nn.Module) -> torch.nn.Module:
    return model.lm_head  # type: ignore[no-any-return]


def collected(_model: torch.nn.Module) -> dict[str, Any]:
    return {"calls": dict(_CALLS), "hidden": list(_HIDDEN)}


def reset(_model: torch.nn.Module) -> None:
    for calls in _CALLS.values():
        calls.clear()
    _HIDDEN.clear()


# ----------------------------------------------------------------------------- injections
@contextmanager
def _drop_bias() -> Iterator[None]:
    """A loader that never copies the checkpoint's biases (the parameters stay as created)."""
    from vllm.model_executor.model_loader import default_loader

    original = default_loader.DefaultModelLoader.get_all_weights

    def without_bias(self: Any, *args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        for name, tensor in original(self, *args, **kwargs):
            if not name.endswith(".bias"):
                yield name, tensor

    default_loader.DefaultModelLoader.get_all_weights = without_bias  # type: ignore[method-assign]
    try:
        yield
    finally:
        default_loader.DefaultModelLoader.get_all_weights = original  # type: ignore[method-assign]


@contextmanager
def _before_processing(owner: type, edit: Callable[[torch.nn.Module], None]) -> Iterator[None]:
    """Run ``edit`` on each layer ``owner`` (a vLLM quant method or scheme class) handles,
    right before its ``process_weights_after_loading``."""
    original = owner.process_weights_after_loading  # type: ignore[attr-defined]

    def patched(self: Any, layer: torch.nn.Module) -> None:
        with torch.no_grad():
            edit(layer)
        original(self, layer)

    owner.process_weights_after_loading = patched  # type: ignore[attr-defined]
    try:
        yield
    finally:
        owner.process_weights_after_loading = original  # type: ignore[attr-defined]


def _after_scheme_load(edit: Callable[[torch.nn.Module], None]) -> AbstractContextManager[None]:
    """Run ``edit`` on each compressed-tensors FP8 layer before vLLM processes its weights."""
    from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
        CompressedTensorsW8A8Fp8,
    )

    return _before_processing(CompressedTensorsW8A8Fp8, edit)


def _first_shard_scale_for_all(layer: torch.nn.Module) -> None:
    scale = layer.weight_scale
    if scale.numel() > 1 and scale.dim() == 1:  # per-tensor: one scale per logical shard
        scale.data.copy_(scale.data[0].expand_as(scale.data))


def _one_d_scale_as_tensor_wise(layer: torch.nn.Module) -> None:
    """A per-channel scale vector read as one tensor-wise scale (its first element), as a
    row-wise kernel handed the 1-D scale without the reshape to (N, 1) reads it."""
    scale = layer.weight_scale
    if scale.dim() == 2 and scale.shape[1] == 1 and scale.shape[0] > 1:
        scale.data.copy_(scale.data[0].expand_as(scale.data))


@contextmanager
def _ignore_by_shards_only() -> Iterator[None]:
    """An ignore list matched shard by shard only: an entry naming the fused module itself
    (``...qkv_proj``) is not honoured, so that layer is built quantized."""
    from vllm.model_executor.layers.quantization.compressed_tensors import utils

    original = utils.find_matching_patterns

    def shards_only(layer_name: str, patterns: Any, *args: Any, **kwargs: Any) -> Any:
        leaf = layer_name.rpartition(".")[2]
        kept = [p for p in patterns if not p.endswith(leaf)]
        return original(layer_name, kept, *args, **kwargs)

    utils.find_matching_patterns = shards_only
    try:
        yield
    finally:
        utils.find_matching_patterns = original


INJECTIONS: dict[str, Callable[[], Any]] = {
    "ignore_by_shards_only": _ignore_by_shards_only,
    "dropped_bias": _drop_bias,
    "one_shard_scale_for_all": lambda: _after_scheme_load(_first_shard_scale_for_all),
    "one_d_scale_as_tensor_wise": lambda: _after_scheme_load(_one_d_scale_as_tensor_wise),
}


# ----------------------------------------------------------------------------- workarounds
SILU_QUANT_FINDING = (
    "vllm-cpu 0.32 registers the fused SiluAndMul + FP8 static per-tensor producer "
    "(fused_act_quant._FUSED_ACT_QUANT) on every platform, and it calls "
    "torch.ops._C.silu_and_mul_quant, which the CPU build does not have: a Llama-family "
    "model with a static per-tensor FP8 down_proj raises AttributeError in its first "
    "forward (docs/ENGINE-FINDINGS.md)"
)


@contextmanager
def cpu_unfused_act_quant(record: list[str]) -> Iterator[None]:
    """Take the fused producers whose op this build lacks out of vLLM's table, so the model
    runs vLLM's own unfused path (SiluAndMul, then the linear quantizes its input)."""
    from vllm.model_executor.layers.fusion import fused_act_quant

    table = fused_act_quant._FUSED_ACT_QUANT
    missing = {
        key: fn
        for key, fn in table.items()
        if fn is fused_act_quant._silu_and_mul_fp8_static
        and not hasattr(torch.ops._C, "silu_and_mul_quant")
    }
    for key in missing:
        del table[key]
        record.append(f"unfused {key[0].__name__} + {key[1]}: {SILU_QUANT_FINDING}")
    try:
        yield
    finally:
        table.update(missing)


# ----------------------------------------------------------------------------- driver
def run(checkpoint: Path, prompts: list[list[int]], inject: str | None = None) -> dict[str, Any]:
    """Load ``checkpoint`` in vLLM, run each prompt, return the capture (see module doc)."""
    for key, value in ENGINE_ENV.items():
        os.environ.setdefault(key, value)
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.platforms import current_platform

    from qharness_vllm import ENGINE
    from qharness_vllm.platform import cpu_fp8_ops

    # The CPU build's ops, which the workarounds look at, loaded as vLLM loads them: the
    # library built for this CPU (_C_AVX2 without AVX-512; `import vllm._C` there dies
    # of an illegal instruction).
    current_platform.import_kernels()

    workarounds: list[str] = []
    out: dict[str, Any] = {
        "engine": ENGINE,
        "bound_ops": True,
        "inject": inject or "",
        "workarounds": workarounds,
    }
    with ExitStack() as stack:
        stack.enter_context(cpu_fp8_ops())
        stack.enter_context(cpu_unfused_act_quant(workarounds))
        stack.enter_context(keep_unquantized_weights())
        if inject:
            stack.enter_context(INJECTIONS[inject]())
        try:
            llm = LLM(
                model=str(checkpoint),
                skip_tokenizer_init=True,
                dtype="bfloat16",
                enforce_eager=True,
                max_model_len=MAX_MODEL_LEN,
                max_num_seqs=1,
                enable_prefix_caching=False,
                seed=0,
            )
        except Exception as exc:  # a refusal to load is a result, with vLLM's reason
            out["error"] = f"{type(exc).__name__}: {exc}"
            out["traceback"] = traceback.format_exc()[-4000:]
            return out
        (state,) = llm.apply_model(install_hooks)
        out |= state
        params = SamplingParams(max_tokens=1, temperature=0.0)
        calls: dict[str, list[Any]] = {name: [] for name in state["layers"]}
        hidden: list[torch.Tensor] = []
        try:
            for ids in prompts:
                llm.apply_model(reset)
                llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)
                (got,) = llm.apply_model(collected)
                for name, seen in got["calls"].items():
                    calls[name].append(seen)
                hidden.append(torch.cat(got["hidden"]) if got["hidden"] else torch.empty(0))
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
            out["traceback"] = traceback.format_exc()[-4000:]
        out["calls"] = calls
        out["hidden"] = hidden
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("prompts", type=Path, help="JSON list of token-id lists")
    parser.add_argument("--inject", choices=sorted(INJECTIONS), default=None)
    args = parser.parse_args(argv)
    prompts = json.loads(args.prompts.read_text())
    result = run(args.checkpoint, prompts, args.inject)
    torch.save(result, args.output)
    print(result.get("error", "ok"), file=sys.stderr)
    return 0


def capture(
    checkpoint: Path,
    prompts: list[list[int]],
    out_dir: Path,
    inject: str | None = None,
    timeout_s: float = 1200.0,
) -> dict[str, Any]:
    """Run `main` in a fresh process (one engine, freed when it exits) and load its capture.

    A process that dies without writing one gives ``{"error": ...}`` with its exit status
    and the end of its stderr, so the caller reports it instead of hanging or crashing."""
    import subprocess

    out_dir.mkdir(parents=True, exist_ok=True)
    tag = f"-{inject}" if inject else ""
    prompts_file = out_dir / "prompts.json"
    prompts_file.write_text(json.dumps(prompts))
    output = out_dir / f"capture{tag}.pt"
    output.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "qharness_vllm.model_capture", str(checkpoint), str(output)]
    cmd += [str(prompts_file), *(["--inject", inject] if inject else [])]
    env = {**os.environ, **ENGINE_ENV}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"vLLM capture timed out after {timeout_s:.0f} s"}
    (out_dir / f"capture{tag}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not output.exists():
        tail = proc.stderr.strip().splitlines()[-5:]
        status = str(proc.returncode)
        if proc.returncode < 0:  # a signal killed it (SIGILL: an instruction this CPU lacks)
            status += f" ({signal.Signals(-proc.returncode).name})"
        return {"error": f"capture process exited {status}: " + " | ".join(tail)}
    result: dict[str, Any] = torch.load(output, weights_only=True)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
