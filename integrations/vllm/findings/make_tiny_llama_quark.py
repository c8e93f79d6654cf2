"""Standalone (no qharness): a tiny Llama float folder quantized by AMD Quark 0.13 through
its public API (LLMTemplate, ModelQuantizer, export_safetensors).

    <venv with amd-quark>/bin/python make_tiny_llama_quark.py FLOAT_DIR OUT_DIR SCHEME...

FLOAT_DIR: e.g. the float folder make_tiny_llama_llmcompressor.py writes; SCHEME: fp8,
mxfp4. Prints each config's quantization_config and layer 0's q_proj/k_proj tensors.
"""

import json
import sys
from pathlib import Path

import torch
from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors
from transformers import AutoModelForCausalLM

src, out = Path(sys.argv[1]), Path(sys.argv[2])

for scheme in sys.argv[3:]:
    net = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16).eval()
    config = LLMTemplate.get("llama").get_config(scheme=scheme, exclude_layers=["lm_head"])
    ids = torch.randint(3, 512, (16, 32), generator=torch.Generator().manual_seed(1))
    calib = torch.utils.data.DataLoader(ids, batch_size=4)
    try:
        q = ModelQuantizer(config).quantize_model(net, calib)
        target = out / scheme
        with torch.no_grad():
            export_safetensors(q, target)
    except Exception as exc:
        import traceback

        traceback.print_exc()
        print(scheme, "FAILED", type(exc).__name__, exc)
        continue
    qc = json.loads((target / "config.json").read_text()).get("quantization_config")
    print("==", scheme, json.dumps(qc)[:1500])
    from safetensors import safe_open

    for f in sorted(target.glob("*.safetensors")):
        with safe_open(str(f), "pt") as h:
            for k in sorted(h.keys()):
                if "layers.0.self_attn.q_proj" in k or "layers.0.self_attn.k_proj" in k:
                    t = h.get_tensor(k)
                    print("  ", k, tuple(t.shape), t.dtype)
