"""Reference fused-MoE block: routing, per-expert quantized weights, the two grouped GEMMs.

One MoE block, as inference engines run it (vLLM/SGLang ``fused_experts`` layout)::

    logits [T, E] -> softmax -> top-k (optionally renormalized)          `route`
    x [T, H] -> quantize as the scheme's activation spec (a1)            `run_moe`
    per chosen expert e: [g | u] = a1 @ w13[e]^T, w13 [E, 2I, H]         GEMM 1 (K = H)
    act = SiLU(g) * u, in float32                                        `silu_and_mul`
    a2 = act quantized as the scheme's activation spec                   (intermediate)
    y = a2 @ w2[e]^T, w2 [E, H, I]                                       GEMM 2 (K = I)
    out[t] = sum over the k chosen experts of weight * y                 combine, float32

w13 holds the gate projection in rows [0, I) and the up projection in rows [I, 2I).
Weights are quantized per expert with the scheme's weight spec (any tile granularity: the
expert's [R, K] matrix is quantized exactly as a linear layer's weight).

The pipeline (`run_moe`) is shared by every path; a path supplies only the grouped GEMM
(`GroupedGemm`). Rows of the intermediate are in canonical (token, slot) order, row
``t * k + j`` for token t's j-th chosen expert, whatever order a kernel computes them in.

Where the activation is computed matters: SiLU in bf16 vs float32 is a known source of
mismatch between kernels and references. Here SiLU-and-mul is computed in float32 on
float32 GEMM outputs (`ACTIVATION_DTYPE`); a path whose GEMM returns bf16 feeds bf16
values into that float32 SiLU, and its declared numerics say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from harness.core.fastcodec import decode_scaled
from harness.core.quantize import (
    QuantizedTensor,
    calibrate_input_scale,
    expand_scale,
    quantize,
    quantize_input,
)
from harness.core.schemes import QuantSpec, Scheme

ACTIVATION_DTYPE = torch.float32  # SiLU-and-mul is evaluated in this dtype


# ---------------------------------------------------------------------------- routing
@dataclass(frozen=True)
class Routing:
    """Top-k experts per token (ids int64 [T, k], descending logit) and their weights."""

    ids: torch.Tensor
    weights: torch.Tensor  # float32 [T, k]
    num_experts: int

    @property
    def top_k(self) -> int:
        return int(self.ids.shape[1])

    def row_experts(self) -> torch.Tensor:
        """Expert of each intermediate row, canonical (token, slot) order: [T * k]."""
        return self.ids.reshape(-1)

    def row_tokens(self) -> torch.Tensor:
        """Token of each intermediate row, canonical order: [T * k]."""
        t, k = self.ids.shape
        return torch.arange(t, device=self.ids.device).repeat_interleave(k)

    def tokens_per_expert(self) -> torch.Tensor:
        return torch.bincount(self.ids.reshape(-1), minlength=self.num_experts)


def route(logits: torch.Tensor, top_k: int, renormalize: bool) -> Routing:
    """Bit-exact, portable top-k routing.

    Selection ranks the raw logits (softmax is monotone, and ranking logits avoids ties that
    float32 rounding of the probabilities would create). Ties are broken deterministically:
    the lowest expert index wins, via a stable descending sort (``torch.topk`` makes no such
    promise on every device). Weights: softmax over all experts in float64, the chosen
    probabilities optionally renormalized to sum to 1 (still float64), then rounded once to
    float32, so the weights are the same bits on every platform.
    """
    if logits.dim() != 2:
        raise ValueError(f"router logits must be [tokens, experts], got {tuple(logits.shape)}")
    num_experts = int(logits.shape[1])
    if not 0 < top_k <= num_experts:
        raise ValueError(f"top_k={top_k} must be in 1..{num_experts} (number of experts)")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("router logits contain NaN or Inf; routing would be ill-defined")
    order = torch.sort(logits.float(), dim=1, descending=True, stable=True).indices
    ids = order[:, :top_k].contiguous()
    probs = torch.softmax(logits.double(), dim=1)
    chosen = probs.gather(1, ids)
    if renormalize:
        chosen = chosen / chosen.sum(dim=1, keepdim=True)
    return Routing(ids=ids, weights=chosen.float(), num_experts=num_experts)


# --------------------------------------------------------------------------- weights
@dataclass
class QuantizedExperts:
    """One quantized weight per expert: codes uint8 [E, R, K], tile scales [E, gr, gc]."""

    codes: torch.Tensor
    scale: torch.Tensor
    spec: QuantSpec

    @property
    def num_experts(self) -> int:
        return int(self.codes.shape[0])

    def expert(self, e: int) -> QuantizedTensor:
        return QuantizedTensor(self.codes[e], self.scale[e], self.spec)

    def dequantize(self) -> torch.Tensor:
        """Exact float32 values [E, R, K] (one decode for all experts, by the fast decoder
        that `QuantizedTensor.dequantize` uses: the reference's value table, times scale)."""
        shape = tuple(self.codes.shape[1:])
        scales = torch.stack([expand_scale(s, self.spec, shape) for s in self.scale])
        return decode_scaled(self.codes, self.spec.format, scales, torch.float32)

    def to(self, device: torch.device | str) -> QuantizedExperts:
        return QuantizedExperts(self.codes.to(device), self.scale.to(device), self.spec)


def quantize_experts(w: torch.Tensor, spec: QuantSpec) -> QuantizedExperts:
    """Quantize each expert's [R, K] matrix of ``w`` [E, R, K] on its own."""
    if w.dim() != 3:
        raise ValueError(f"expert weights must be [E, R, K], got {tuple(w.shape)}")
    parts = [quantize(w[e], spec) for e in range(w.shape[0])]
    return QuantizedExperts(
        torch.stack([p.codes for p in parts]), torch.stack([p.scale for p in parts]), spec
    )


@dataclass
class MoELayer:
    """A quantized MoE block as an engine holds it after loading a checkpoint."""

    scheme: Scheme
    w13: QuantizedExperts  # [E, 2I, H]: gate rows [0, I), up rows [I, 2I)
    w2: QuantizedExperts  # [E, H, I]
    a1_scale: torch.Tensor | None  # static input scale (tile grid) when the scheme has one
    a2_scale: torch.Tensor | None  # static intermediate scale, likewise
    # Per-expert biases of the two GEMMs (float32 [E, 2I] and [E, H], or None): added once,
    # to the dequantized product, before the GEMM's output rounding (vLLM's fused_moe).
    b13: torch.Tensor | None = None
    b2: torch.Tensor | None = None

    @property
    def has_bias(self) -> bool:
        return self.b13 is not None or self.b2 is not None

    @property
    def num_experts(self) -> int:
        return self.w13.num_experts

    @property
    def hidden(self) -> int:
        return int(self.w13.codes.shape[2])

    @property
    def intermediate(self) -> int:
        return int(self.w2.codes.shape[2])

    def to(self, device: torch.device | str) -> MoELayer:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return MoELayer(
            self.scheme,
            self.w13.to(device),
            self.w2.to(device),
            move(self.a1_scale),
            move(self.a2_scale),
            move(self.b13),
            move(self.b2),
        )


def quantize_moe(
    w13: torch.Tensor,
    w2: torch.Tensor,
    scheme: Scheme,
    calibration: tuple[torch.Tensor, Routing] | None = None,
) -> MoELayer:
    """Quantize float expert weights [E, 2I, H] and [E, H, I] per expert.

    Static activation scales come from ``calibration`` (inputs x and their routing): the
    input scale from x, the intermediate scale from the float64 reference SiLU-and-mul
    output of the quantized layer. Static scales are one per layer, shared by every expert,
    as engines use the maximum of per-expert calibrated scales.
    """
    if (
        w13.shape[0] != w2.shape[0]
        or w13.shape[1] != 2 * w2.shape[2]
        or w13.shape[2] != w2.shape[1]
    ):
        raise ValueError(
            f"w13 {tuple(w13.shape)} and w2 {tuple(w2.shape)} are not [E, 2I, H] and [E, H, I]"
        )
    layer = MoELayer(
        scheme,
        quantize_experts(w13, scheme.weight),
        quantize_experts(w2, scheme.weight),
        None,
        None,
    )
    spec = scheme.activation
    if spec is not None and not spec.dynamic:
        if calibration is None:
            raise ValueError(
                f"scheme {scheme.name} has static activation scales: pass calibration=(x, routing)"
            )
        x, routing = calibration
        layer.a1_scale = calibrate_input_scale(x, spec)
        _, act = reference_intermediate(layer, x, routing)
        layer.a2_scale = calibrate_input_scale(act.float(), spec)
    return layer


# -------------------------------------------------------------------------- pipeline
@dataclass
class Operand:
    """A GEMM's left operand: exact float32 values, plus codes/scales when quantized."""

    values: torch.Tensor  # float32 [M, K]
    quantized: QuantizedTensor | None


def quantize_operand(
    x: torch.Tensor, spec: QuantSpec | None, static: torch.Tensor | None
) -> Operand:
    """Quantize an activation as the scheme says (None: it stays float32), as an `Operand`.

    The quantizer is the linear one (`harness.core.quantize.quantize_input`); this only
    pairs its codes with their exact float32 values.
    """
    q = quantize_input(x, spec, static)
    return Operand(x.float(), None) if q is None else Operand(q.dequantize(), q)


def gather_rows(op: Operand, rows: torch.Tensor) -> Operand:
    """Rows ``rows`` of an operand, with their scales (per-tensor or per-row tiles only)."""
    values = op.values[rows]
    if op.quantized is None:
        return Operand(values, None)
    q = op.quantized
    block_rows = q.spec.block[0]
    if block_rows is None:
        scale = q.scale
    elif block_rows == 1:
        scale = q.scale[rows]
    else:
        raise ValueError(
            f"activation tiles of {block_rows} rows cannot be gathered per token; MoE "
            "activations need per-tensor or one-row tiles"
        )
    return Operand(values, QuantizedTensor(q.codes[rows], scale, q.spec))


class GroupedGemm(Protocol):
    """y[r] = a[r] @ w[expert[r]]^T for every row r, returned as float32 [M, N]."""

    def __call__(
        self, a: Operand, row_experts: torch.Tensor, w: QuantizedExperts
    ) -> torch.Tensor: ...


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up in `ACTIVATION_DTYPE`, gate = first half of the last dim."""
    g, u = gate_up.to(ACTIVATION_DTYPE).chunk(2, dim=-1)
    return torch.nn.functional.silu(g) * u


@dataclass
class MoETrace:
    """A path's result with the intermediate it fed to the second GEMM (canonical rows)."""

    out: torch.Tensor  # float32 [T, H]
    act: torch.Tensor  # float32 [T * k, I], SiLU-and-mul output before quantization
    act_q: QuantizedTensor | None  # the quantized intermediate (None: weight-only scheme)
    # The grouped GEMMs' outputs as the kernel returned them (values of its output dtype),
    # so the suite can compare paths element by element where rounding is determined.
    gate_up: torch.Tensor | None = None  # float32 [T * k, 2I], GEMM 1
    y: torch.Tensor | None = None  # float32 [T * k, H], GEMM 2, before the combine
    # The routing the path chose, when it routed itself (`SelfRoutingMoEPath`): rows above
    # follow its slot order. None when the suite's routing was handed in.
    routing: Routing | None = None


def combine(y: torch.Tensor, routing: Routing) -> torch.Tensor:
    """Weighted sum over each token's k experts, float32: [T * k, H] -> [T, H]."""
    t, k = routing.ids.shape
    return (y.float().reshape(t, k, -1) * routing.weights.float()[:, :, None]).sum(dim=1)


def _check_fits(layer: MoELayer, x: torch.Tensor, routing: Routing) -> None:
    if x.dim() != 2 or x.shape[1] != layer.hidden:
        raise ValueError(f"x must be [tokens, {layer.hidden}], got {tuple(x.shape)}")
    if routing.ids.shape[0] != x.shape[0] or routing.num_experts != layer.num_experts:
        raise ValueError(
            f"routing for {routing.ids.shape[0]} tokens over {routing.num_experts} experts "
            f"does not fit x {tuple(x.shape)} and a layer of {layer.num_experts} experts"
        )


def add_expert_bias(
    y: torch.Tensor, bias: torch.Tensor | None, row_experts: torch.Tensor
) -> torch.Tensor:
    """A float32 GEMM output plus its rows' expert bias (one float32 addition), or as is."""
    return y if bias is None else y.float() + bias.float()[row_experts]


def run_moe(layer: MoELayer, x: torch.Tensor, routing: Routing, gemm: GroupedGemm) -> MoETrace:
    """The MoE block with ``gemm`` as its grouped GEMM; everything else is the reference.
    Expert biases are added to the GEMM's float32 output (for a float32-output GEMM that is
    the bias added to its float32 sum, one rounding; others refuse biased layers)."""
    _check_fits(layer, x, routing)
    spec = layer.scheme.activation
    experts = routing.row_experts()
    a1 = gather_rows(quantize_operand(x, spec, layer.a1_scale), routing.row_tokens())
    gate_up = add_expert_bias(gemm(a1, experts, layer.w13), layer.b13, experts)
    act = silu_and_mul(gate_up)
    a2 = quantize_operand(act, spec, layer.a2_scale)
    y = add_expert_bias(gemm(a2, experts, layer.w2), layer.b2, experts)
    return MoETrace(
        out=combine(y, routing), act=act, act_q=a2.quantized, gate_up=gate_up.float(), y=y.float()
    )


class RowGatheringGemm(Protocol):
    """A fused kernel's grouped GEMM, which gathers its rows itself: each (token, slot) pair
    p reads row p // top_k of ``q`` and multiplies it by its expert's weight; float32
    values [T * k, N] in canonical pair order."""

    def __call__(
        self, q: QuantizedTensor | None, w: QuantizedExperts, top_k: int
    ) -> torch.Tensor: ...


def run_fused_moe(
    layer: MoELayer, x: torch.Tensor, routing: Routing, gemm: RowGatheringGemm
) -> MoETrace:
    """`run_moe` for a fused kernel that gathers token rows itself: GEMM 1 gets the quantized
    tokens [T, H] (each pair reads its token's row, top_k pairs a token), GEMM 2 the
    quantized intermediate [T * k, I] (one row a pair, top_k 1). Everything else is the
    reference's."""
    _check_fits(layer, x, routing)
    spec = layer.scheme.activation
    a1 = quantize_operand(x, spec, layer.a1_scale)
    if layer.has_bias:
        raise ValueError("run_fused_moe: a fused kernel adds expert biases itself")
    gate_up = gemm(a1.quantized, layer.w13, routing.ids.shape[1])
    act = silu_and_mul(gate_up)
    a2 = quantize_operand(act, spec, layer.a2_scale)
    y = gemm(a2.quantized, layer.w2, 1)
    return MoETrace(out=combine(y, routing), act=act, act_q=a2.quantized, gate_up=gate_up, y=y)


# ------------------------------------------------------------- float64 reference
@dataclass
class ReferenceMoE:
    """Float64 reference values of one MoE call (see `reference_moe`)."""

    gate_up: torch.Tensor  # float64 [T * k, 2I]
    act: torch.Tensor  # float64 [T * k, I]
    act_q: QuantizedTensor | None  # quantization of float32(act)
    out: torch.Tensor  # float64 [T, H], from act_q (or act when unquantized)


def down_and_combine_f64(
    a2: torch.Tensor, w2: torch.Tensor, routing: Routing, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Float64 second GEMM (plus the expert bias, if any) and combine from intermediate
    values ``a2`` [T*k, I]."""
    w = w2.double()[routing.row_experts()]  # [T*k, H, I]
    y = torch.einsum("ri,rhi->rh", a2.double(), w)
    if bias is not None:
        y = y + bias.double().to(y.device)[routing.row_experts()]
    t, k = routing.ids.shape
    return (y.reshape(t, k, -1) * routing.weights.double()[:, :, None]).sum(dim=1)


def reference_intermediate(
    layer: MoELayer, x: torch.Tensor, routing: Routing
) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 (gate_up [T*k, 2I], act [T*k, I]) from exact dequantized operands."""
    rows = routing.row_tokens()
    a1 = quantize_operand(x, layer.scheme.activation, layer.a1_scale).values.double()[rows]
    w13 = layer.w13.dequantize().double()[routing.row_experts()]
    gate_up = torch.einsum("rk,rnk->rn", a1, w13)
    if layer.b13 is not None:
        gate_up = gate_up + layer.b13.double().to(gate_up.device)[routing.row_experts()]
    g, u = gate_up.chunk(2, dim=-1)
    return gate_up, g * torch.sigmoid(g) * u


def reference_moe(layer: MoELayer, x: torch.Tensor, routing: Routing) -> ReferenceMoE:
    """Float64 reference: exact dequantized operands, float64 GEMMs and SiLU.

    The intermediate is rounded to float32 before it is quantized (the quantizer works on
    float32, as every path's does); the output is computed from those codes, so the
    discontinuity of quantization sits in one visible place (the stored codes).
    """
    spec = layer.scheme.activation
    gate_up, act = reference_intermediate(layer, x, routing)
    a2 = quantize_operand(act.float(), spec, layer.a2_scale)
    a2_values = act if a2.quantized is None else a2.values.double()
    out = down_and_combine_f64(a2_values, layer.w2.dequantize(), routing, layer.b2)
    return ReferenceMoE(gate_up=gate_up, act=act, act_q=a2.quantized, out=out)
