"""The numbers: element formats, scale rules, schemes, the reference quantizer, seeded
inputs, and the error bounds every comparison uses. Depends on torch alone.

Modules, each with its one job:

- ``formats``: Element formats as data (`ElementFormat`), one table-driven codec: RNE +
  saturating encode to uint8 codes, exact decode, FP4 packing; lossless float32 <-> E8M0
  scale codes.
- ``spec``, ``schemes``: `spec`: `QuantSpec` (format, scale tile `block=(rows, cols)`, scale
  format/rounding, static/dynamic, clamp) and the one home of the block sizes (`MX_BLOCK`,
  `FP8_BLOCK`); `schemes`: `Scheme` (weight + activation spec, SQNR floor) and the `SCHEMES`
  registry. Behaviour is read from fields, never from names.
- ``scale_formats``: Scale formats as data (`ScaleFormat`: `fp32`, `e8m0`, `e4m3`, two-level
  `e4m3_x_fp32` for NVFP4): each row's lossless codec to the stored form, stored bytes, NaN
  rule for a nonfinite block, and whether a float32 per-tensor level multiplies the block
  scales (`QuantizedTensor.global_scale`); code reads `spec.scale_fmt`, never the name.
- ``scales``: Registry of scale rules: tile amax -> scale (`exact` fp32; the E8M0 modes
  `floor`, `rceil`, `even`, `ceil`, computed from amax's float32 bits, each with its
  saturation loss; `e4m3_rne`, and for the two-level form the global scale and block scales
  over it). See docs/SCHEMES.md.
- ``fastcodec``: The same element encode/decode, E8M0 scale modes, E8M0 storage encode and
  FP4 packing by integer arithmetic on float32 bits (FP8 elements by torch's own cast after
  the clamp, the same code for all 2^32 float32 patterns: `python -m
  tests.core.sweep_fp8_cast`), a few passes over memory each; `quantize` and `dequantize`
  use them (``reference=True`` runs the readable reference instead). MX quantize on whole
  one-row blocks is one pass, `e8m0_block_encode` (block amax, E8M0 scale, element codes of
  x times the exact inverse scale; rows with a NaN or Inf block are redone by the two-pass
  `divide_and_encode`); dequantize is one `decode_scaled` (table gather times scale).
  `tests/core/test_fastcodec.py` holds them to the reference bit for bit, MX at every scale
  edge of every mode, format and clamp.
- ``fused``: `large_cpu_compiled`: a codec function (`fastcodec.encode_scaled`,
  `divide_and_encode`, `e8m0_block_encode`, `decode_scaled`, FP4 packing, `quantize`'s tile
  amax) runs through `torch.compile` when given a CPU tensor of at least 2^20 elements
  (functions on a scale grid, such as the E8M0 storage encode, from 2^15), so its dozen
  tensor operations become one pass over memory; the same Python either way, so the same
  bits (`tests/core/test_fused.py` sweeps the compiled kernels, `QHARNESS_FUSED=force`,
  against the reference). Small tensors, every suite case, stay eager and never compile; a
  failed compile (no C++ compiler) falls back to eager and `fused_status()` says why;
  `QHARNESS_FUSED=0` turns it off.
- ``inputs``: Seeded (sha256 of the case name), bf16-valued inputs whose spread follows the
  scheme's scale tiles (K blocks close enough that each matters), within what the scale
  format's block level holds (`ScaleFormat.block_range`); never zeros. Corner values planted
  where the quantizer sees them (`plant_corners`: exact ties at several binades, subnormals,
  the clamp bound and beyond it under static scales); static scales calibrated on another
  batch (`calibration_batch`).
- ``hard_inputs`` (with ``harness.linear.designs``): Inputs built to show one bug class each
  where the seeded bf16 inputs cannot (docs/TEETH.md): `hard_inputs` rewrites one tensor
  (block maxima just beside where the scale rule changes, onto it in bf16; a static scale
  that is not a power of two with elements at ties of x / s that a reciprocal multiply
  crosses; float32 elements 2^-12 beside ties; a long row's amax in its last columns), each
  asserting it did what it is for; `designs` composes linear cases from them (`DESIGNS`:
  float32 binade-crossing activations, reciprocal ties, K = 4160/4224, fp16 outputs past
  65504, 3x5 and 2x3 128x128 weight-scale grids, subnormal-dominated outputs), checked
  against the reference quantizer's float64 product in `test_linear_design` (no golden);
  `suites/test_quantizers.py` feeds the tensors to every quantizer.
- ``quantize``: Tile-based quantizer (`quantize`, `QuantizedTensor`; fast codecs by default,
  the reference with ``reference=True``), `QuantizedLinear` (the loaded layer), the one
  activation quantizer (`quantize_input`, behind linear's `quantize_activation` and MoE's
  `quantize_operand`), calibration of static scales.
- ``files``: Reading user-named files without hanging or escaping: regular-file check on a
  non-blocking descriptor (FIFO, directory, symlink loop are one clear error), safe relative
  names confined to a root.
- ``compare`` (with ``harness.paths.bounds``): Tolerance policy: Higham's `gamma_bound`
  (gamma_n times the sum of magnitudes, n the roundings each term passes through), rounding
  bounds per output dtype, `within_bound` (NaN never passes), SQNR, bit-exact comparison.
  `paths/bounds.py` is the one GEMM bound: `gemm_interval` turns a path's declared
  `Numerics` (operand dtype, per-term and epilogue roundings, output rounding;
  `unquantized_activation` for a weight-only kernel, whose reference activation is the input
  in that dtype, `paths.base.scheme_as_multiplied`, `multiplied_activation`;
  `other_than_emulated` says why a path's bits may differ from emulated's) into the interval
  each output must round into; linear and loading (`linear_gemm_interval`) and MoE
  (`grouped_gemm_interval`) derive theirs through it.
- ``conventions``: Engine conventions as named `QuantSpec` variants (`spec.conventions`):
  scale floor 1/(fp8_max*512), reciprocal multiply, 224 fnuz bound, finite scales for Inf MX
  blocks, 2^-126 divisor, FP4 ties away from zero (`element_ties`, a tie rule of `encode`),
  a zero scale as float32 eps, NVFP4's E4M3 block-scale floor, reciprocal two-level multiply
  and inverted global, an Inf block's scale saturated (`saturates_inf_block`, which the
  special-values rules read); hooks the reference quantizer applies.
- ``checks``: Named checks: functions returning a `CheckResult`, evaluated every one and
  recorded under `checks` in a test's result; the element-wise ones name the first offending
  element (index, got, expected, bound). The domain checks live in the room that owns the
  domain (`harness.linear.checks`, `harness.moe.checks`, `harness.loading.checks`); the
  `rounding_interval` and `bits_vs_emulated` checks are here.
"""
