"""``platform``: what this machine is, which capabilities its tiny probes found against what
its row expects, and the linear and MoE native-dispatch decisions made from them."""

from __future__ import annotations

import argparse
from typing import Any

from harness.cli.common import SIMULATE_HELP, apply_simulation, print_json
from harness.errors import EXIT_OK


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("platform", help="platform, probed capabilities, support matrix")
    p.add_argument("--json", action="store_true")
    p.add_argument("--simulate", metavar="SIMULATOR:ARCH", help=SIMULATE_HELP)
    p.set_defaults(func=cmd_platform)


def platform_report() -> dict[str, Any]:
    """Platform, probed capabilities vs expectations, and the native support matrix."""
    from harness.linear.matrix import linear_dispatch_report, support_matrix
    from harness.moe.dispatch_report import moe_dispatch_report
    from harness.platform.capabilities import capabilities, expected, expected_key
    from harness.platform.info import detect

    info = detect()
    caps = capabilities(info)
    exp = expected(info)
    return {
        "platform": info.to_json(),
        "capabilities": {
            name: {"available": c.available, "expected": name in exp, "detail": c.detail}
            for name, c in caps.items()
        },
        "expected_missing": sorted(n for n in exp if not caps[n].available),
        "expected_row": expected_key(info),
        "support": support_matrix(info),
        "linear_dispatch": linear_dispatch_report(info),
        "moe_dispatch": moe_dispatch_report(info),
    }


def cmd_platform(args: argparse.Namespace) -> int:
    apply_simulation(args)
    report = platform_report()
    if args.json:
        print_json(report)
        return EXIT_OK
    p = report["platform"]
    print(f"device       {p['device']}  (is_cuda_alike={p['is_cuda_alike']})")
    print(f"arch         {p['arch']}  {p['name']}")
    print(f"torch        {p['torch_version']}  cuda={p['cuda_version']}  hip={p['hip_version']}")
    print(f"fp8 dtype    {p['fp8_dtype']}")
    simulated = p.get("simulated")
    print(f"simulated    {simulated or 'no (real hardware)'}  platform key {p['platform_key']}")
    print(f"\ncapabilities (tiny ops run here; expected: row {report['expected_row']!r})")
    for name, c in report["capabilities"].items():
        mark = "yes" if c["available"] else "no "
        exp = "expected" if c["expected"] else ""
        detail = "" if c["available"] else c["detail"]
        print(f"  {mark}  {name:<36} {exp:<9}{detail}".rstrip())
    if report["expected_missing"]:
        print(f"\nEXPECTED BUT MISSING: {', '.join(report['expected_missing'])}")
    print("\nsupport matrix (scheme x path; reasons for emulated-only)")
    for scheme, paths in report["support"].items():
        cells = ", ".join(
            f"{path}: {'yes' if s['supported'] else 'no'}" for path, s in paths.items()
        )
        print(f"  {scheme:<32} {cells}")
        for path, s in paths.items():
            if not s["supported"]:
                print(f"      {path}: {s['reason']}")
    for problem in report["linear_dispatch"]["problems"]:
        print(f"  LINEAR TABLE PROBLEM: {problem}")
    _print_moe_dispatch(report["moe_dispatch"])
    return EXIT_OK


def _print_moe_dispatch(moe: dict[str, Any]) -> None:
    """The MoE native-dispatch table: this platform's decisions, then every row."""
    print(f"\nMoE native dispatch (table row {moe['platform_key']!r}; harness/moe/dispatch.py)")
    for scheme, d in moe["schemes"].items():
        runs = "native runs here" if d["native_runs_here"] else f"not native: {d['reason']}"
        print(f"  {scheme:<32} {d['decision'] or 'NO DECISION':<28} {runs}")
    print("  table:")
    for key, row in moe["table"].items():
        cells = "; ".join(f"{dec}: {', '.join(names) or '-'}" for dec, names in row.items())
        print(f"    {key:<8} {cells}")
    for problem in moe["problems"]:
        print(f"  TABLE PROBLEM: {problem}")
