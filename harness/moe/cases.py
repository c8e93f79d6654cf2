"""MoE cases: sizes, the suite's parameter grid, seeded inputs and the golden builder.

One golden entry per scheme, ``moe/<scheme>``, holds everything the suite needs for every
(experts, top-k) config x token count x renormalize case: the "checkpoint" (per-expert
weight codes and scales, static activation scales), the inputs (x, router logits), the
routing (ids, weights; bit-exact), the intermediate's codes and scales, and float64-derived
references for the intermediate before quantization and for the output, and a sha256 of
each seeded input (x, router logits, float weights), which are regenerated, not stored. The output
reference is computed from the stored intermediate codes, so the one discontinuous step
(quantizing the intermediate) is pinned in the golden and accounted for by the suite.

Sizes: H = 32, I = 32 (MX 1x32 blocks tile both reduction dims: one block along H for
w13, one along I for w2). FP8 128x128 / 1x128 block schemes get one partial tile per
matrix at these sizes (`quantize` zero-pads edge tiles); their multi-tile behaviour is
covered by the linear suite. The (8, 2) config uses the first 8 of the 16 experts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.core.inputs import generator, scaled_normal
from harness.core.quantize import QuantizedTensor
from harness.core.schemes import get_scheme
from harness.moe.dispatch import MOE_SCHEMES
from harness.moe.model import (
    MoELayer,
    QuantizedExperts,
    Routing,
    quantize_moe,
    reference_moe,
    route,
)
from harness.moe.paths import MoEProblem, moe_paths
from harness.paths.case import Case
from harness.store.golden_registry import GoldenData, regenerated, register_each, tensor_digest

MOE_HIDDEN = 32
MOE_INTERMEDIATE = 32
MAX_EXPERTS = 16
MAX_TOKENS = 64
EXPERT_CONFIGS: tuple[tuple[int, int], ...] = ((8, 2), (16, 4))  # (experts, top-k)
TOKEN_COUNTS: tuple[int, ...] = (1, 7, 64)
RENORMALIZE: tuple[bool, ...] = (False, True)
# Peaks (powers of two) of |x @ w13^T| and of the expert outputs: SiLU's curved region,
# and outputs of moderate size.
GATE_UP_MAGNITUDE = 8.0
OUTPUT_MAGNITUDE = 16.0
# Static scales come from a calibration batch seeded apart from the fed one and scaled by
# this power of two, so the fed activations and intermediates exceed the calibrated range:
# saturation is exercised, and a path computing a dynamic scale instead gets other codes.
CALIBRATION_GAIN = 0.5

# Router logits are built so that routing has the edge cases every run must get right:
EMPTY_EXPERT = 7  # never chosen (its logit is -16 for every token but token 0): no tokens
LAST_EXPERT_LOGIT = -16.0  # expert 15 likewise, so the 16-expert config has two empty experts
TIE_TOKEN = 0  # expert 3 first, then experts 1, 4, 6, 7 tied: lowest index wins
# -> top-2 [3, 1]; top-4 [3, 1, 4, 6] (the tie crosses the top-k boundary; 7 loses it)
ALL_TIED_TOKEN = 1  # every logit equal: top-k is experts 0..k-1 with equal weights


def config_id(experts: int, top_k: int) -> str:
    return f"e{experts}k{top_k}"


def renorm_id(renormalize: bool) -> str:
    return "renorm" if renormalize else "norenorm"


GOLDEN_ENTRY = "moe/{scheme}"  # one golden entry per scheme: every config and token count


def golden_entry(scheme: str) -> str:
    return GOLDEN_ENTRY.format(scheme=scheme)


@dataclass(frozen=True)
class MoECase(Case):
    SUITE = "moe"
    ID = ("scheme", "path", "tokens_id", "config", "renorm")
    RECORD = ("scheme", "path", "shape=shape_label", "experts", "top_k", "renormalize")
    GOLDEN = GOLDEN_ENTRY

    scheme: str
    path: str
    tokens: int
    experts: int
    top_k: int
    renormalize: bool

    @property
    def tokens_id(self) -> str:
        return f"t{self.tokens}"

    @property
    def config(self) -> str:
        return config_id(self.experts, self.top_k)

    @property
    def renorm(self) -> bool:
        """The renormalize flag under its id name (``renorm`` / ``norenorm``)."""
        return self.renormalize

    @property
    def shape_label(self) -> str:
        return f"t{self.tokens}-h{MOE_HIDDEN}-i{MOE_INTERMEDIATE}"

    @property
    def problem(self) -> MoEProblem:
        return MoEProblem(self.tokens, self.experts, self.top_k, MOE_HIDDEN, MOE_INTERMEDIATE)


def moe_cases() -> Iterator[MoECase]:
    for scheme in sorted(MOE_SCHEMES):
        for path in moe_paths():
            for tokens in TOKEN_COUNTS:
                for experts, top_k in EXPERT_CONFIGS:
                    for renormalize in RENORMALIZE:
                        yield MoECase(scheme, path, tokens, experts, top_k, renormalize)


# --------------------------------------------------------------------------- inputs
def router_logits(name: str) -> torch.Tensor:
    """[MAX_TOKENS, MAX_EXPERTS] bf16-valued logits with the edge cases described above."""
    gen = generator(name)
    logits = (2.0 * torch.randn(MAX_TOKENS, MAX_EXPERTS, generator=gen)).clamp(-8, 8)
    logits[:, EMPTY_EXPERT] = LAST_EXPERT_LOGIT
    logits[:, MAX_EXPERTS - 1] = LAST_EXPERT_LOGIT
    logits[TIE_TOKEN] = -4.0
    logits[TIE_TOKEN, 3] = 2.0
    logits[TIE_TOKEN, [1, 4, 6, EMPTY_EXPERT]] = 1.0
    logits[TIE_TOKEN, MAX_EXPERTS - 1] = LAST_EXPERT_LOGIT
    logits[ALL_TIED_TOKEN] = 0.5
    return logits.to(torch.bfloat16).float()


def power_of_two_factor(peak: float, target: float) -> float:
    return float(2.0 ** round(torch.tensor(target / peak).log2().item()))


def moe_inputs(scheme_name: str) -> dict[str, torch.Tensor]:
    """Seeded x [64, H], logits [64, 16], w13 [16, 2I, H], w2 [16, H, I] (bf16 values), and
    a calibration batch (x and logits, seeded apart from the fed ones) for static scales.

    Each expert's weights are scaled by a power of two (exact) so that |x @ w13^T| peaks
    near GATE_UP_MAGNITUDE and the expert outputs near OUTPUT_MAGNITUDE. Built once per
    process and scheme (every MoE test of a scheme asks for them); callers get fresh copies.
    """
    return {name: t.clone() for name, t in _moe_inputs(scheme_name).items()}


@functools.cache
def _moe_inputs(scheme_name: str) -> dict[str, torch.Tensor]:
    scheme = get_scheme(scheme_name)
    base = golden_entry(scheme.input_seed_name)  # scale-mode variants share the inputs
    h, i = MOE_HIDDEN, MOE_INTERMEDIATE
    x = scaled_normal(f"{base}/x", MAX_TOKENS, h, scheme.activation)
    w13, w2 = [], []
    for e in range(MAX_EXPERTS):
        a = scaled_normal(f"{base}/w13/{e}", 2 * i, h, scheme.weight)
        gate_up = x.double() @ a.double().t()
        a = a * power_of_two_factor(gate_up.abs().max().item(), GATE_UP_MAGNITUDE)
        g, u = (x.double() @ a.double().t()).chunk(2, dim=-1)
        act = g * torch.sigmoid(g) * u
        b = scaled_normal(f"{base}/w2/{e}", h, i, scheme.weight)
        peak = (act @ b.double().t()).abs().max().item()
        w13.append(a)
        w2.append(b * power_of_two_factor(peak, OUTPUT_MAGNITUDE))
    calibration = scaled_normal(f"{base}/calibration", MAX_TOKENS, h, scheme.activation)
    return {
        "x": x,
        "logits": router_logits(f"{base}/logits"),
        "w13": torch.stack(w13),
        "w2": torch.stack(w2),
        "calibration_x": calibration * CALIBRATION_GAIN,
        "calibration_logits": router_logits(f"{base}/calibration/logits"),
    }


# ------------------------------------------------------------------------- goldens
SEEDED_WEIGHTS = ("w13", "w2")
SEEDED_INPUTS = ("x", "logits", *SEEDED_WEIGHTS)  # regenerated from the seeds, stored as a digest


def input_digest(t: torch.Tensor) -> torch.Tensor:
    """sha256 of a tensor's bf16 bytes, uint8 [32]: pins the seeded inputs in the golden
    without storing them, so a changed generator is told apart from a quantizer bug."""
    return tensor_digest(t.detach().to("cpu", torch.bfloat16))


def golden_moe_inputs(data: GoldenData, scheme_name: str) -> dict[str, torch.Tensor]:
    """`moe_inputs`, after checking each of `SEEDED_INPUTS` against the golden's digest
    (a GoldenError naming the refresh command otherwise)."""
    inputs = moe_inputs(scheme_name)
    for name in SEEDED_INPUTS:
        regenerated(golden_entry(scheme_name), name, inputs[name].to(torch.bfloat16), data)
    return inputs


def build_moe_golden(scheme_name: str) -> GoldenData:
    scheme = get_scheme(scheme_name)
    inputs = moe_inputs(scheme_name)
    x, logits = inputs["x"], inputs["logits"]
    data = GoldenData()
    for name in SEEDED_INPUTS:
        data.exact[f"{name}_sha256"] = input_digest(inputs[name])
    for experts, top_k in EXPERT_CONFIGS:
        cfg = config_id(experts, top_k)
        # Static scales are calibrated on another 64-token batch routed for this config, as
        # engines calibrate offline; the fed batch exceeds them (CALIBRATION_GAIN). The
        # per-expert weight codes of the first `experts` experts do not depend on it.
        cal_routing = route(inputs["calibration_logits"][:, :experts], top_k, False)
        calibration = (inputs["calibration_x"], cal_routing)
        layer = quantize_moe(inputs["w13"][:experts], inputs["w2"][:experts], scheme, calibration)
        if experts == MAX_EXPERTS:
            data.exact.update(
                {
                    "w13_codes": layer.w13.codes,
                    "w13_scale": layer.w13.scale,
                    "w2_codes": layer.w2.codes,
                    "w2_scale": layer.w2.scale,
                }
            )
        if layer.a1_scale is not None:
            data.exact["a1_scale"] = layer.a1_scale
        if layer.a2_scale is not None:
            data.exact[f"{cfg}.a2_scale"] = layer.a2_scale
        data.exact[f"{cfg}.ids"] = route(logits[:, :experts], top_k, False).ids.to(torch.int32)
        for renormalize in RENORMALIZE:
            r = renorm_id(renormalize)
            data.exact[f"{cfg}.{r}.weights"] = route(
                logits[:, :experts], top_k, renormalize
            ).weights
        for tokens in TOKEN_COUNTS:
            key = f"{cfg}.t{tokens}"
            for renormalize in RENORMALIZE:
                routing = route(logits[:tokens, :experts], top_k, renormalize)
                ref = reference_moe(layer, x[:tokens], routing)
                data.reference[f"{key}.{renorm_id(renormalize)}.out_ref"] = ref.out.float()
            # The intermediate does not depend on the combine weights: either run's will do.
            data.reference[f"{key}.act_ref"] = ref.act.float()
            if ref.act_q is not None:
                data.exact[f"{key}.act_codes"] = ref.act_q.codes
                data.exact[f"{key}.act_scale"] = ref.act_q.scale
    return data


register_each(build_moe_golden, ((golden_entry(n), (n,)) for n in sorted(MOE_SCHEMES)))


# ------------------------------------------------------------ loading from a golden
@dataclass
class LoadedMoECase:
    """A golden MoE case as tensors, for one config and token count."""

    layer: MoELayer
    x: torch.Tensor  # float32 [T, H]
    logits: torch.Tensor  # float32 [T, E]
    ids: torch.Tensor  # int64 [T, k]
    weights: torch.Tensor  # float32 [T, k]
    act_ref: torch.Tensor  # float32 [T*k, I], float64 reference rounded once
    act_q: QuantizedTensor | None  # golden intermediate codes/scales
    out_ref: torch.Tensor  # float32 [T, H], from act_q (or the float64 act)

    @property
    def routing(self) -> Routing:
        return Routing(self.ids, self.weights, int(self.layer.num_experts))


def load_moe_case(data: GoldenData, case: MoECase) -> LoadedMoECase:
    scheme = get_scheme(case.scheme)
    t = data.tensors
    e, k, n = case.experts, case.top_k, case.tokens
    cfg = config_id(e, k)
    key = f"{cfg}.t{n}"
    w13 = QuantizedExperts(t["w13_codes"][:e], t["w13_scale"][:e], scheme.weight)
    w2 = QuantizedExperts(t["w2_codes"][:e], t["w2_scale"][:e], scheme.weight)
    layer = MoELayer(scheme, w13, w2, t.get("a1_scale"), t.get(f"{cfg}.a2_scale"))
    inputs = golden_moe_inputs(data, case.scheme)
    act_q = None
    if scheme.activation is not None:
        act_q = QuantizedTensor(t[f"{key}.act_codes"], t[f"{key}.act_scale"], scheme.activation)
    return LoadedMoECase(
        layer=layer,
        x=inputs["x"][:n].to(torch.bfloat16).float(),
        logits=inputs["logits"][:n, :e].to(torch.bfloat16).float(),
        ids=t[f"{cfg}.ids"][:n].long(),
        weights=t[f"{cfg}.{renorm_id(case.renormalize)}.weights"][:n],
        act_ref=t[f"{key}.act_ref"],
        act_q=act_q,
        out_ref=t[f"{key}.{renorm_id(case.renormalize)}.out_ref"],
    )
