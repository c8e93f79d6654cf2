"""The field table of a results record and of the history row: one row per field.

Validation (`harness.report.reading.results`), the history columns
(`harness.report.reading.frame`), the model section (`harness.report.model.models_section`),
the recorder's case fields and the docs (docs/HISTORY.md's column table, a generated block)
all read `FIELDS`, so a new field is one row here: it is validated, becomes a history
column of its dtype and is documented.

A row says where the value lives (`Where`), what validation holds it to (``json``: a
string, a number or a count, or None when it is free-form or derived), its history column's
pandas dtype (None: not a history column), how the frame reads it (``read``), and whether a
rise or a fall of it is a regression and past what change (``threshold``: the rule
`harness.report.model.regress` applies to every such row; the model suite's rules are
`harness.report.model.models_section`'s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from harness.platform.simulate import EXECUTIONS
from harness.report.reading.limits import INT64_MAX

Where = Literal["run", "record", "metric", "benchmark"]
"""``run``: from the document, shared by a run's rows; ``record``: a record's own key;
``metric``: a key of the record's ``metrics``; ``benchmark``: pytest-benchmark's JSON."""
JsonType = Literal["string", "number", "count"]
"""What validation holds a field to, null always allowed: ``count`` is a number from 0 to
2^63-1 (bytes); ``number`` may be ``Infinity`` or ``NaN`` (an exact SQNR, news)."""
Direction = Literal["rise", "fall"]


@dataclass(frozen=True)
class Threshold:
    """How far a field may move the worse way (its row's ``regresses``) before a run
    against its baseline is a regression (`harness.report.model.regress`), and how the
    regression is named and its two values shown."""

    kind: str  # the regression's name in every report ("SQNR down")
    by: float  # the allowed change: in the field's unit, or a fraction (``relative``)
    relative: bool = False
    nan_is_worse: bool = True  # a value that became NaN regressed
    finite_baseline: bool = False  # an infinite baseline value (an exact match) is none
    ran_only: bool = True  # only a test that ran now (a skipped test has no value)
    unit: str = ""  # shown after each value (" bytes": as a whole number)
    digits: int = 2


# Inputs are seeded and quantization is deterministic, so on one platform SQNR moves only
# when numerics change; 1 dB is far above run-to-run differences from accumulation order.
SQNR_DROP_DB = 1.0
# The bound is derived, so the fraction of it used is comparable between runs.
RATIO_RISE = 0.1
# Allocator rounding aside, peaks are exact.
PEAK_GROWTH = 0.05


def as_number(value: Any) -> float | None:
    """A metric as a float; NaN stays NaN (a NaN SQNR is news), non-numbers become None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def as_text(value: Any) -> str | None:
    """Any value as its text (None stays None)."""
    return None if value is None else str(value)


def only_text(value: Any) -> str | None:
    """A string as it is; anything else None (a free-form metric that may hold anything)."""
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Field:
    """One field: its history column, where it is read from and what it must hold."""

    name: str  # the history column; also the record's key unless ``key`` names another
    where: Where
    dtype: str | None  # pandas dtype of its history column; None: no history column
    json: JsonType | None  # what validation checks; None: free-form or derived, unchecked
    doc: str  # one line, for docs/HISTORY.md
    regresses: Direction | None = None  # which way is worse
    threshold: Threshold | None = None  # past what change a run regressed (with ``regresses``)
    key: str = ""  # the record's (or metric's) key when it differs from ``name``
    read: Callable[[Any], Any] = as_text  # the history value of the recorded one
    group: str = ""  # "case": a test's case field; "model": the model suite's
    choices: tuple[str, ...] = ()  # the values a string field may hold (empty: any)

    @property
    def source(self) -> str:
        """The key in the record (or its metrics) this field is read from."""
        return self.key or self.name


def _run(name: str, doc: str, dtype: str = "string") -> Field:
    return Field(name, "run", dtype, None, doc)


def _metric(name: str, doc: str, json: JsonType | None = "number", **kw: Any) -> Field:
    return Field(name, "metric", "float64", json, doc, read=as_number, **kw)


def _model_text(name: str, key: str, doc: str) -> Field:
    return Field(name, "metric", "string", None, doc, key=key, read=only_text, group="model")


FIELDS: tuple[Field, ...] = (
    _run("run_id", "the run directory's name (or a results file's stem)"),
    _run("created", "the results file's UTC `created` (ISO 8601); orders runs"),
    _run("platform", "`cpu` or the GPU arch (`gfx942`, `sm_90`)"),
    _run("device", "from the results file's `platform`"),
    _run("arch", "from the results file's `platform`"),
    _run("torch_version", "from the results file's `platform`"),
    _run("partial", "the run was interrupted (never stored; kept for completeness)", "bool"),
    _run(
        "runner_key",
        "the runner key (`gfx942@mi300x-rack2`; the platform key without a label): "
        "the report's column and baseline key",
    ),
    _run("runner_label", "the runner's label (results file's `runner`)"),
    _run("runner_host", "the runner's host tag (results file's `runner`)"),
    _run("cuda_version", "the CUDA version under torch"),
    _run("hip_version", "the HIP version under torch"),
    _run("driver_version", "the kernel driver's version"),
    _run("qharness_version", "the harness's version (results file `provenance`)"),
    _run("harness_commit", "the harness's git commit (results file `provenance`)"),
    _run("engine_commit", "the engine under test's commit (results file `provenance`)"),
    _run(
        "engine_versions",
        'JSON `{"plugins": {dist: version}, "engines": {dist: version}, '
        '"commits": {dist: commit}}`, keys sorted',
    ),
    Field(
        "nodeid",
        "record",
        "string",
        "string",
        "pytest test id (the contract `test_linear[<scheme>-<path>-...]`)",
    ),
    Field(
        "suite",
        "record",
        "string",
        "string",
        "the case's suite; `benchmark` for benchmark rows, `other` where none",
        group="case",
    ),
    Field(
        "scheme",
        "record",
        "string",
        "string",
        "the case's scheme (null where a test has none)",
        group="case",
    ),
    Field(
        "path",
        "record",
        "string",
        "string",
        "the case's path (null where a test has none)",
        group="case",
    ),
    Field(
        "shape",
        "record",
        "string",
        None,
        "the case's shape (null where a test has none)",
        group="case",
    ),
    Field(
        "outcome",
        "record",
        "string",
        "string",
        "`passed`, `failed`, `error`, `skipped`, `xfailed`, `xpassed`",
    ),
    Field("reason", "record", "string", "string", "skip reason or failure message"),
    Field("kernel", "metric", "string", None, "the MoE path's kernel (`emulated`: fell back)"),
    Field(
        "execution",
        "record",
        "string",
        "string",
        "what ran on a simulated platform (`interpreted-kernel`, `cpu-code`, `not-run`); "
        "null elsewhere",
        choices=tuple(EXECUTIONS),
    ),
    Field("duration_s", "record", "float64", "number", "test duration", read=as_number),
    _metric(
        "sqnr_db",
        "output SQNR (NaN kept: it is news)",
        regresses="fall",
        threshold=Threshold("SQNR down", SQNR_DROP_DB, unit=" dB", finite_baseline=True),
    ),
    Field("term_sqnr_db", "metric", None, "number", "SQNR of the output's terms, unstored"),
    _metric("sqnr_floor_db", "the scheme's SQNR floor"),
    _metric(
        "worst_error_to_bound",
        "largest error / derived bound",
        None,
        regresses="rise",
        threshold=Threshold("error/bound up", RATIO_RISE, digits=3),
    ),
    _metric(
        "peak_bytes",
        "measured peak memory of the forward call",
        "count",
        regresses="rise",
        threshold=Threshold(
            "peak memory up",
            PEAK_GROWTH,
            relative=True,
            nan_is_worse=False,
            ran_only=False,
            unit=" bytes",
        ),
    ),
    Field(
        "bench_mean_s",
        "benchmark",
        "float64",
        None,
        "pytest-benchmark mean",
        regresses="rise",
        read=as_number,
    ),
    Field(
        "bench_stddev_s", "benchmark", "float64", None, "pytest-benchmark spread", read=as_number
    ),
    _model_text(
        "model", "model", "the model suite's model (metric `model`); null for other suites"
    ),
    _model_text("model_tool", "tool", "the model suite's quantization tool (metric `tool`)"),
    _model_text("model_preset", "preset", "the model suite's tool preset (metric `preset`)"),
    _model_text(
        "model_check",
        "model_check",
        "which of the model suite's tests (`logits` for the logits test)",
    ),
    _metric(
        "top1_agreement",
        "logits' argmax agreement with the unquantized model (docs/MODELS.md)",
        regresses="fall",
        group="model",
    ),
    _metric(
        "sqnr_vs_emulated_db",
        "logits' SQNR against the harness's emulation",
        regresses="fall",
        group="model",
    ),
    _metric(
        "top1_agreement_vs_emulated",
        "argmax agreement with the harness's emulation",
        regresses="fall",
        group="model",
    ),
    _metric(
        "emulated_sqnr_db",
        "the emulation's logits SQNR against the unquantized model",
        group="model",
    ),
    _metric(
        "emulated_top1_agreement",
        "the emulation's argmax agreement with the unquantized model",
        group="model",
    ),
)


def history_columns(fields: tuple[Field, ...] | None = None) -> dict[str, str]:
    """History column -> pandas dtype, in table order."""
    fields = FIELDS if fields is None else fields  # read when called: rows may be added
    return {f.name: f.dtype for f in fields if f.dtype is not None}


def checked(where: Where, fields: tuple[Field, ...] | None = None) -> tuple[Field, ...]:
    """The fields of ``where`` that validation holds to a JSON type."""
    fields = FIELDS if fields is None else fields  # read when called: rows may be added
    return tuple(f for f in fields if f.where == where and f.json is not None)


def record_values(
    record: dict[str, Any], fields: tuple[Field, ...] | None = None
) -> dict[str, Any]:
    """A record's history columns (its own keys and its metrics), as the table reads them."""
    fields = FIELDS if fields is None else fields  # read when called: rows may be added
    metrics = record.get("metrics") or {}
    sources = {"record": record, "metric": metrics}
    return {
        f.name: f.read(sources[f.where].get(f.source))
        for f in fields
        if f.dtype is not None and f.where in sources
    }


def json_problem(field: Field, value: Any) -> str | None:
    """Why ``value`` is not what ``field`` must hold (None when it is)."""
    if value is None or field.json is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if field.choices and value not in field.choices:
        return f"must be one of {', '.join(field.choices)} or null"
    if field.json == "string" and not isinstance(value, str):
        return "must be a string or null"
    if field.json in ("number", "count") and not number:
        return "must be a number or null"
    if field.json == "count" and not (0 <= value <= INT64_MAX):  # NaN fails it too
        return f"must be a count from 0 to {INT64_MAX} (int64) or null"
    return None


def markdown_columns(fields: tuple[Field, ...] | None = None) -> str:
    """docs/HISTORY.md's column table (a generated block of `harness.report.outputs.doc_facts`)."""
    fields = FIELDS if fields is None else fields  # read when called: rows may be added
    kinds = {"string": "string", "float64": "float", "bool": "bool"}
    lines = ["| column | type | worse when it | meaning |", "|---|---|---|---|"]
    for f in fields:
        if f.dtype is not None:
            worse = f.regresses or ""
            lines.append(f"| `{f.name}` | {kinds.get(f.dtype, f.dtype)} | {worse} | {f.doc} |")
    return "\n".join(lines)
