"""Checkpoint loading: every FP8 scheme x named case x platform FP8 flavour (x loader, path).

Fused NVFP4 layers (`test_fused_nvfp4_shards_share_global`): the designed checkpoints of
harness.loading.fused_nvfp4 through each NVFP4 fuser, one global and every shard exact.

The checkpoint of each case comes from its golden entry; every registered loader brings it
to the flavour under test, and the loaded layer must dequantize shard by shard to the
checkpoint, be bit-identical between loaders, and give the golden output through every path
with the bias applied exactly once, and, for paths rounding once, a correct rounding of the
exact product (bit-exact where unique, and the same bits as emulated there). The named
checks: harness/loading/checks.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from harness.linear.paths import get_path, linear_paths
from harness.loading.cases import (
    DESIGNED_CASES,
    LAYOUTS,
    LoadingParams,
    checkpoint_from_golden,
    checkpoint_in_layout,
    designed_case_data,
    loading_params,
    reference_operands,
)
from harness.loading.checkpoint import LinearCheckpoint
from harness.loading.checks import (
    check_fused_scale_shared,
    check_runtime_format,
    check_shards_match_checkpoint,
    fused_nvfp4_checks,
    loader_agreement_checks,
    output_bound,
    output_checks,
    rounding_checks,
)
from harness.loading.fused_nvfp4 import (
    FUSED_NVFP4_DESIGNS,
    NVFP4_FUSERS,
    fused_nvfp4_checkpoint,
)
from harness.loading.loaders import LoadedLayer, get_loader, loaders
from harness.loading.transforms import LoadError
from harness.paths.base import (
    LinearProblem,
    is_reference,
    layer_under_conventions,
    linear_numerics,
    path_conventions,
)
from harness.paths.bounds import linear_gemm_interval, other_than_emulated, rounds_operands
from harness.paths.findings import known_finding
from harness.platform.info import PlatformInfo
from harness.plugin import RecordChecks, RecordResult, load_golden, xfail_known
from harness.store.golden_registry import GoldenData
from harness.store.golden_store import GoldenStore

LOADERS = tuple(loaders())
OUT_DTYPE = torch.bfloat16


def _checkpoint(golden_store: GoldenStore, p: LoadingParams) -> tuple[GoldenData, LinearCheckpoint]:
    data = load_golden(golden_store, p.golden_entry)
    return data, checkpoint_in_layout(checkpoint_from_golden(data, p.scheme, p.case), p.layout)


def _load_or_known(
    loader: str,
    ckpt: LinearCheckpoint,
    p: LoadingParams,
    record_result: RecordResult,
    runs: Callable[[], None] = lambda: None,
) -> LoadedLayer:
    """The loaded layer; a load that raises where a finding of the loader's engine covers
    the case is that finding's xfail (once ``runs`` has not skipped the case), any other
    raise fails the test."""
    try:
        return get_loader(loader).load(ckpt, p.flavour)
    except Exception as exc:
        finding = known_finding(get_loader(loader), p.finding_case())
        if finding is None:
            raise
        runs()
        xfail_known(record_result, finding, f"loader {loader}: {type(exc).__name__}: {exc}")


def _load(
    loader: str,
    ckpt: LinearCheckpoint,
    p: LoadingParams,
    record_result: RecordResult,
    runs: Callable[[], None] = lambda: None,
) -> LoadedLayer:
    support = get_loader(loader).supports(ckpt.scheme, p.flavour)
    if not support.ok:
        pytest.skip(support.reason)
    return _load_or_known(loader, ckpt, p, record_result, runs)


@pytest.mark.parametrize(
    "p", list(loading_params(loaders=LOADERS, layouts=LAYOUTS)), ids=lambda p: p.id
)
def test_loaded_shards_dequantize_to_checkpoint(
    p: LoadingParams,
    golden_store: GoldenStore,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    """Exact where only flavour normalization ran; within one ULP where requantized; in
    every on-disk layout (harness.loading.cases.LAYOUTS: per shard, fused on disk)."""
    _, ckpt = _checkpoint(golden_store, p)
    loaded = _load(p.loader, ckpt, p, record_result)
    record_checks(
        [
            check_runtime_format(loaded, p.flavour),
            check_shards_match_checkpoint(ckpt, loaded),
            check_fused_scale_shared(ckpt, loaded),
        ]
    )


@pytest.mark.parametrize("design", [d.name for d in FUSED_NVFP4_DESIGNS])
@pytest.mark.parametrize("fuser", list(NVFP4_FUSERS))
def test_fused_nvfp4_shards_share_global(
    fuser: str, design: str, record_checks: RecordChecks, record_result: RecordResult
) -> None:
    """A fused NVFP4 layer holds one global and serves every shard as the checkpoint has
    it; a checkpoint whose shards' globals differ may be refused instead
    (harness.loading.fused_nvfp4)."""
    ckpt = fused_nvfp4_checkpoint(design)
    record_result(
        scheme="w_nvfp4",
        loader=fuser,
        design=design,
        shard_globals={
            n: float(s.global_scale) for n, s in zip(ckpt.names, ckpt.shards, strict=True)
        },
    )
    try:
        loaded = NVFP4_FUSERS[fuser](ckpt)
    except LoadError as exc:
        if ckpt.globals_equal:
            raise  # shards that share their global must load
        record_result(refused=str(exc))
        return
    record_checks(fused_nvfp4_checks(ckpt, loaded))


@pytest.mark.parametrize("p", list(loading_params()), ids=lambda p: p.id)
def test_loaders_agree_bit_for_bit(
    p: LoadingParams,
    golden_store: GoldenStore,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """Every loader gives the same runtime tensors as the first, whatever its step order;
    every loader that disagrees is named."""
    _, ckpt = _checkpoint(golden_store, p)
    first, *others = LOADERS
    if not others:
        pytest.skip("only one loader is registered")
    reference = _load(first, ckpt, p, record_result)
    loaded, unsupported = {}, []
    for name in others:
        support = get_loader(name).supports(ckpt.scheme, p.flavour)
        if support.ok:
            loaded[name] = _load_or_known(name, ckpt, p, record_result)
        else:
            unsupported.append(support.reason)  # names the loader
    results = loader_agreement_checks(first, reference, loaded)
    disagreeing = [name for name, r in zip(loaded, results, strict=True) if r.failed]
    record_result(loaders=[first, *loaded], disagreeing_loaders=disagreeing)
    record_checks(results)  # fails naming every disagreeing loader
    if unsupported:  # every supported loader agrees; those left out say why
        pytest.skip("; ".join(unsupported))


@pytest.mark.parametrize(
    "p",
    list(loading_params(loaders=LOADERS, paths=tuple(linear_paths()), biases=(True, False))),
    ids=lambda p: p.id,
)
def test_loaded_layer_output(
    p: LoadingParams,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    """Output of the loaded layer through a path vs the golden, bias applied exactly once."""
    data, ckpt = _checkpoint(golden_store, p)
    _check_output(p, data, ckpt, qh_platform, record_checks, record_result)


@pytest.mark.parametrize(
    "p",
    list(
        loading_params(
            loaders=LOADERS, paths=tuple(linear_paths()), biases=(True,), cases=DESIGNED_CASES
        )
    ),
    ids=lambda p: p.id,
)
def test_designed_checkpoint_output(
    p: LoadingParams,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    """The same checks on the designed checkpoints (harness.loading.cases.DESIGNED_CASES:
    a static scale with elements at ties of x / s, fused shards of K = 4224 peaking in their
    last columns), built here and checked against the reference quantizer (no golden)."""
    data = designed_case_data(p.scheme, p.case)
    ckpt = checkpoint_from_golden(data, p.scheme, p.case)
    _check_output(p, data, ckpt, qh_platform, record_checks, record_result)


def _check_output(
    p: LoadingParams,
    data: GoldenData,
    ckpt: LinearCheckpoint,
    qh_platform: PlatformInfo,
    record_checks: RecordChecks,
    record_result: RecordResult,
) -> None:
    if not p.bias:
        ckpt = ckpt.without_bias()
    x = data.tensors["x"].float()
    m, k = x.shape
    path = get_path(p.path)
    n = sum(ckpt.logical_widths)  # the layer's N, however it is stored
    problem = LinearProblem(m, n, k, p.bias, OUT_DTYPE)

    def path_runs(layer: LoadedLayer) -> None:
        support = path.supports(layer.layer.scheme, problem, qh_platform)
        if not support.ok:
            pytest.skip(support.reason)

    def path_runs_reference() -> None:
        # a load a finding explains: the path's own skip where it would not run the layer
        # (judged on the first loader's, which every loader must match bit for bit)
        path_runs(_load(LOADERS[0], ckpt, p, record_result))

    loaded = _load(p.loader, ckpt, p, record_result, path_runs_reference)
    path_runs(loaded)
    device = qh_platform.torch_device
    # an engine finding this case may reproduce
    finding = known_finding(path, p.finding_case(problem=problem))
    try:
        y = path.forward(loaded.layer.to(device), x.to(device), OUT_DTYPE).cpu()
    except Exception as exc:
        if finding is None:
            raise
        xfail_known(record_result, finding, f"{type(exc).__name__}: {exc}")
    assert y.shape == (m, n), f"{p.path} returned shape {tuple(y.shape)}"
    assert y.dtype == OUT_DTYPE, f"{p.path} returned {y.dtype}"

    conventions = path_conventions(path)  # the path's activation quantizer's, if any
    numerics = linear_numerics(path, loaded.layer.scheme, problem)  # bounds derive from it
    record_result(numerics=numerics.describe())  # the declaration held to
    a, w = reference_operands(ckpt, x, conventions, numerics)
    y_ref = data.tensors["y_ref"].double()
    if conventions:
        record_result(conventions=sorted(conventions))
    if conventions or not numerics.activation_quantized:
        # the exact effect of the activation values the declaration changes
        y_ref = y_ref + (a - reference_operands(ckpt, x)[0]) @ w.t()
    bias = data.tensors["bias"].double()
    abs_product = data.tensors["abs_product"].double()
    units = numerics.rounding_units  # each output rounding's size, as declared
    bound = output_bound(y_ref, bias, abs_product, k, p.bias, OUT_DTYPE, units)
    y_emulated = None
    if not is_reference(path):  # the same loaded layer through the emulated path
        same = layer_under_conventions(loaded.layer, conventions, numerics)
        y_emulated = get_path("emulated").forward(same, x, OUT_DTYPE).cpu()
    interval = linear_gemm_interval(a, w, bias if p.bias else None, numerics)
    other = other_than_emulated(a, w, numerics)
    if rounds_operands(a, w, numerics):
        # the exact effect of the declared operand rounding (zero where it changes nothing)
        added = bias if p.bias else torch.zeros_like(bias)
        bound = bound + (interval.center - (a @ w.t() + added)).abs()
    results = [
        *output_checks(y, y_ref, bias, bound, p.bias, p.path),
        *rounding_checks(y, y_emulated, interval, numerics.output_roundings, p.path, other),
    ]
    record_checks(results, known_finding=finding)
