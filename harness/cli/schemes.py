"""``schemes``: the quantization schemes, one line each or as JSON."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from harness.cli.common import print_json
from harness.errors import EXIT_OK

if TYPE_CHECKING:  # the CLI imports the core lazily, per command
    from harness.core.spec import QuantSpec


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("schemes", help="list quantization schemes")
    p.add_argument("names", nargs="*", help="only these schemes (unknown names are an error)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_schemes)


def _activation_timing(spec: QuantSpec) -> str:
    """When an activation's scales are made: a two-level format has a calibrated global
    scale and per-call block scales."""
    if spec.scale_fmt.per_tensor_level:
        return "static global, dynamic blocks"
    return "dynamic" if spec.dynamic else "static"


def cmd_schemes(args: argparse.Namespace) -> int:
    from harness.core.schemes import SCHEMES, get_scheme

    names = args.names or sorted(SCHEMES)
    schemes = [get_scheme(n) for n in names]  # UnknownSchemeError -> usage error
    if args.json:
        print_json([s.to_json() for s in schemes])
        return EXIT_OK
    width = max(len(s.name) for s in schemes)
    for s in schemes:
        w = s.weight
        a = s.activation
        act = "unquantized" if a is None else f"{a.format} {a.granularity} {_activation_timing(a)}"
        print(
            f"{s.name:<{width}}  W {w.format} {w.granularity} "
            f"scale {w.scale_format}/{w.scale_rounding} | A {act} | SQNR >= {s.sqnr_floor_db} dB"
        )
    return EXIT_OK
