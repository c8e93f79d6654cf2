"""qharness adapter for AMD aiter's Triton kernels (``aiter.ops.triton``): linear paths and a
quantizer, on a ROCm GPU or on a simulated gfx942/gfx950 under Triton's interpreter."""

ENGINE = "aiter"
