"""qharness adapter for SGLang's Triton FP8 quantizers and torch MoE routers, on a ROCm GPU
or on a simulated gfx942/gfx950 under Triton's interpreter."""

ENGINE = "sglang"
