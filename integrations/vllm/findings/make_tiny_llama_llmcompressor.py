"""Standalone (no qharness): a tiny seeded Llama quantized by llm-compressor 0.14 presets.

    <llm-compressor venv>/bin/python make_tiny_llama_llmcompressor.py OUT_DIR PRESET...

e.g. NVFP4A16 NVFP4 MXFP4A16 MXFP4 MXFP8A16 MXFP8. Writes OUT_DIR/float and
OUT_DIR/<preset>, prints each config's weight and activation arguments and layer 0's q_proj
tensors as stored. Load a folder with fp8_moe_no_cpu_backend.py (it loads any checkpoint).
"""

import hashlib
import json
import sys
from pathlib import Path

import torch
from datasets import Dataset
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM

out = Path(sys.argv[1])
presets = sys.argv[2:]
cfg = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
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
flt = out / "float"
flt.mkdir(parents=True, exist_ok=True)
(flt / "config.json").write_text(json.dumps(cfg))
net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(flt), dtype=torch.float32)
with torch.no_grad():
    for name, p in net.named_parameters():
        g = torch.Generator().manual_seed(
            int.from_bytes(hashlib.sha256(name.encode()).digest()[:7], "little")
        )
        z = torch.randn(tuple(p.shape), generator=g)
        p.copy_(
            1 + 0.1 * z
            if "norm" in name
            else (z / p.shape[-1] ** 0.5 if p.dim() >= 2 and "embed" not in name else z)
        )
net.to(torch.bfloat16).save_pretrained(flt)

for preset in presets:
    net = AutoModelForCausalLM.from_pretrained(flt, dtype=torch.bfloat16)
    ids = torch.randint(3, 512, (16, 32), generator=torch.Generator().manual_seed(1)).tolist()
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(
            models.WordLevel(vocab={f"t{i}": i for i in range(512)}, unk_token="t0")
        ),
        unk_token="t0",
        pad_token="t0",
    )
    kw = dict(
        dataset=Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * 32] * 16}),
        processor=tok,
        num_calibration_samples=16,
        max_seq_length=32,
    )
    try:
        oneshot(
            model=net,
            recipe=QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head"]),
            **kw,
        )
        q = out / preset.lower()
        net.save_pretrained(q, save_compressed=True)
    except Exception as exc:
        print(preset, "FAILED", type(exc).__name__, exc)
        continue
    qc = json.loads((q / "config.json").read_text())["quantization_config"]
    print(
        "==",
        preset,
        qc.get("format"),
        json.dumps(
            {
                k: v
                for k, v in next(iter(qc["config_groups"].values())).items()
                if k in ("weights", "input_activations")
            }
        ),
    )
    for f in sorted(q.glob("*.safetensors")):
        with safe_open(str(f), "pt") as h:
            for k in sorted(h.keys()):
                if "layers.0.self_attn.q_proj" in k:
                    t = h.get_tensor(k)
                    print("  ", k, tuple(t.shape), t.dtype)
