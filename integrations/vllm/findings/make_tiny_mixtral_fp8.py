"""Standalone (no qharness): a tiny Mixtral (4 experts, top-2) built from a config with
seeded weights, quantized by llm-compressor's FP8_DYNAMIC preset through its public API.

    <llm-compressor venv>/bin/python make_tiny_mixtral_fp8.py OUT_DIR [PRESET]

Writes OUT_DIR/float and OUT_DIR/<preset> and prints layer 0's tensors as stored (the
experts come out per expert as gate_proj/up_proj/down_proj, per-channel bf16 scales; the
router stays bf16). Feed OUT_DIR/<preset> to fp8_moe_no_cpu_backend.py.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM

CONFIG = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
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
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
}


def seeded(name: str, shape: tuple[int, ...]) -> torch.Tensor:
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:7], "little")
    z = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    if "norm" in name:
        return 1 + 0.1 * z
    return z / shape[-1] ** 0.5 if len(shape) >= 2 and "embed" not in name else z


def show(folder: Path) -> None:
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), "pt") as h:
            for k in sorted(h.keys()):
                if "layers.0." in k:
                    t = h.get_tensor(k)
                    print(" ", k, tuple(t.shape), t.dtype)


def main() -> None:
    out = Path(sys.argv[1])
    preset = sys.argv[2] if len(sys.argv) > 2 else "FP8_DYNAMIC"
    flt = out / "float"
    flt.mkdir(parents=True, exist_ok=True)
    (flt / "config.json").write_text(json.dumps(CONFIG))
    net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(flt), dtype=torch.float32)
    with torch.no_grad():
        for name, p in net.named_parameters():
            p.copy_(seeded(name, tuple(p.shape)))
    net.to(torch.bfloat16).save_pretrained(flt)

    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier

    net = AutoModelForCausalLM.from_pretrained(flt, dtype=torch.bfloat16)
    recipe = QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head", "re:.*gate$"])
    oneshot(model=net, recipe=recipe)
    q = out / preset.lower()
    net.save_pretrained(q, save_compressed=True)
    print(f"{q} (layer 0):")
    show(q)


if __name__ == "__main__":
    main()
