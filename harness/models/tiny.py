"""Tiny transformer models built from configs, with seeded weights (no model hub).

Each `TinyModel` is a Hugging Face config (a plain dict, written as ``config.json``) and a
seed. `build_float_model` makes the float checkpoint a quantization tool reads: the
architecture from ``transformers``, every parameter drawn from its own generator seeded by
sha256(model name, parameter name), so the weights are the same on every machine and do not
depend on the order modules are built in. Sizes are chosen so every K dimension is a
multiple of 128 (FP8 128x128 blocks) and of 32 (MX blocks).

Scales: linear weights N(0, 1/K) keep activations O(1) through the residual stream; norm
weights 1 + N(0, 0.1^2); biases N(0, 0.5^2), large next to the quantization error of an
output so a dropped bias is visible; embeddings N(0, 1).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

COMMON: dict[str, Any] = {
    "vocab_size": 512,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@dataclass(frozen=True)
class TinyModel:
    """A model architecture (HF ``config.json`` fields) and what it exercises."""

    name: str
    config: dict[str, Any]
    description: str
    moe: bool = False
    # module-name suffixes a quantizer must leave alone besides lm_head (MoE routers)
    keep_float: tuple[str, ...] = field(default_factory=tuple)
    # the recipes (harness.models.recipes names) this model is made with; empty: all
    recipes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def experts(self) -> int:
        return int(self.config.get("num_local_experts", 0))

    def checkpoint_layers(self) -> list[str]:
        """The layers of the checkpoint files, grouped as vLLM fuses them
        (`harness.models.files.layer_modules`): for a MoE model each expert's gate/up
        shards and its down projection, one layer each."""
        return self._layers(per_expert=True)

    def quantized_layers(self) -> list[str]:
        """The vLLM modules a quantizer that targets every Linear but lm_head (and the
        routers) must have quantized, in model order (a MoE block's experts are one)."""
        return self._layers(per_expert=False)

    def moe_blocks(self) -> list[str]:
        """vLLM's fused experts module of each MoE block (none for a dense model)."""
        if not self.moe:
            return []
        layers = range(int(self.config["num_hidden_layers"]))
        return [f"model.layers.{i}.block_sparse_moe.experts" for i in layers]

    def _layers(self, per_expert: bool) -> list[str]:
        names = []
        blocks = self.moe_blocks()
        for i in range(int(self.config["num_hidden_layers"])):
            prefix = f"model.layers.{i}"
            names += [f"{prefix}.self_attn.qkv_proj", f"{prefix}.self_attn.o_proj"]
            if not self.moe:
                names += [f"{prefix}.mlp.gate_up_proj", f"{prefix}.mlp.down_proj"]
                continue
            experts = blocks[i]
            if not per_expert:
                names.append(experts)
                continue
            for j in range(self.experts):
                names += [f"{experts}.{j}.gate_up_proj", f"{experts}.{j}.down_proj"]
        return names

    @property
    def has_bias(self) -> bool:
        return bool(self.config.get("attention_bias") or self.config.get("mlp_bias"))


FP8_RECIPES = ("llmcompressor:FP8_DYNAMIC", "llmcompressor:FP8", "llmcompressor:FP8_BLOCK")
MODELS: dict[str, TinyModel] = {
    m.name: m
    for m in (
        TinyModel(
            "llama_tiny",
            {**COMMON, "architectures": ["LlamaForCausalLM"], "model_type": "llama"},
            "dense Llama: fused qkv and gate-up shards, no bias (every recipe)",
        ),
        TinyModel(
            "llama_tiny_bias",
            {
                **COMMON,
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "attention_bias": True,
            },
            "dense Llama with q/k/v/o biases (the dropped-bias class)",
            recipes=FP8_RECIPES,
        ),
        TinyModel(
            "mixtral_tiny",
            {
                **COMMON,
                "architectures": ["MixtralForCausalLM"],
                "model_type": "mixtral",
                "num_local_experts": 4,
                "num_experts_per_tok": 2,
            },
            "Mixtral MoE: 4 experts, top-2, the routers left in bf16",
            moe=True,
            keep_float=(".gate",),
            recipes=("llmcompressor:FP8_DYNAMIC",),
        ),
    )
}


# Module names (the last part before ``.weight``) of the architectures in `MODELS`
NORMS = frozenset({"input_layernorm", "post_attention_layernorm", "norm"})
EMBEDDINGS = frozenset({"embed_tokens"})


def seed_of(*parts: str) -> int:
    """A 63-bit seed from sha256 of the parts (portable, order-independent of module build)."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def _draw(model: str, name: str, shape: torch.Size) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed_of(model, name))
    return torch.randn(tuple(shape), generator=gen, dtype=torch.float32)


def seeded_value(model: str, name: str, param: torch.Tensor) -> torch.Tensor:
    """The seeded value of parameter ``name`` (float32; see the module doc for the scales)."""
    z = _draw(model, name, param.shape)
    module, _, kind = name.rpartition(".")
    owner = module.rpartition(".")[2]
    if owner in NORMS:
        return 1.0 + 0.1 * z
    if kind == "bias":
        return 0.5 * z
    if param.dim() >= 2 and owner not in EMBEDDINGS:  # [.., N, K] (fused experts: [E, N, K])
        return z / math.sqrt(param.shape[-1])
    return z


def config_json(model: TinyModel) -> str:
    return json.dumps(model.config, sort_keys=True, indent=2)


def build_float_model(model: TinyModel, folder: Path) -> Path:
    """Write the bf16 float checkpoint of ``model`` (config + seeded safetensors) to ``folder``.

    Needs ``transformers`` (imported here: the harness itself does not depend on it).
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config_json(model))
    config = AutoConfig.from_pretrained(folder)
    net = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    with torch.no_grad():
        for name, param in net.named_parameters():
            param.copy_(seeded_value(model.name, name, param))
    net = net.to(torch.bfloat16)
    net.save_pretrained(folder, safe_serialization=True)
    return folder


def prompts(model: TinyModel, count: int = 4, length: int = 32) -> list[list[int]]:
    """Seeded prompt token ids (never the special ids 0-2)."""
    gen = torch.Generator().manual_seed(seed_of(model.name, "prompts"))
    vocab = int(model.config["vocab_size"])
    ids = torch.randint(3, vocab, (count, length), generator=gen)
    return [[int(t) for t in row] for row in ids]
