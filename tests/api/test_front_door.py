"""The front door (`harness/__init__.py`): every public name resolves, lazily and cheaply.

Plugin authors import from ``harness`` alone, so its ``__all__`` is a contract: each name
must resolve to the object its home module defines, ``import harness`` must not load torch
(or build a path, or run a probe), and the type checker must see the same names.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from tests.hang_guard import HANG_GUARD_S

INIT = Path(harness.__file__)

# Names the plugin-author contract promises (docs/PATHS.md, docs/ENGINES-ADAPTERS.md).
PROMISED = {
    *("QuantSpec", "Scheme", "SCHEMES", "get_scheme", "register_scheme", "mx_spec"),
    *("WHOLE", "MX_BLOCK", "FP8_BLOCK"),
    *("quantize", "quantize_activation", "QuantizedTensor", "QuantizedLinear"),
    *("encode", "decode", "e8m0_encode", "e8m0_decode", "pack_fp4", "unpack_fp4"),
    *("Support", "LinearProblem", "LinearPath", "LinearPathBase", "PathBase", "Numerics"),
    *("KernelContract", "OperandContract", "DispatchTable", "EMULATE", "ANY_PLATFORM"),
    *("choose", "dispatch_problems", "MoEPath", "MoEProblem", "Quantizer", "Loader"),
    *("PlatformInfo", "KnownFinding", "QHarnessError", "PluginError"),
}


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=HANG_GUARD_S,
    )
    return done.stdout.strip()


def test_import_harness_loads_no_torch_and_builds_nothing() -> None:
    out = _run(
        "import sys, harness\n"
        "heavy = sorted(m for m in sys.modules if m == 'torch' or m.startswith("
        "('torch.', 'harness.paths', 'harness.platform', 'harness.core')))\n"
        "print(heavy)"
    )
    assert out == "[]", f"import harness loaded {out}"


def test_all_lists_every_promised_name() -> None:
    assert set(harness.__all__) >= PROMISED
    assert len(harness.__all__) == len(set(harness.__all__))


@pytest.mark.parametrize("name", sorted(set(harness.__all__) - {"__version__"}))
def test_every_public_name_resolves_to_its_home_object(name: str) -> None:
    home = importlib.import_module(harness._HOME[name])
    assert getattr(harness, name) is getattr(home, name)
    assert name in dir(harness)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        harness.not_a_name  # noqa: B018


def test_type_checkers_see_the_same_names() -> None:
    """The TYPE_CHECKING block imports exactly the lazily exported names, from their homes."""
    seen: dict[str, str] = {}
    for node in ast.walk(ast.parse(INIT.read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                seen |= {a.name: str(stmt.module) for a in stmt.names}
    assert seen == harness._HOME


def test_harness_quantize_is_the_function_and_the_old_module() -> None:
    """``harness.quantize`` quantizes whether or not the module of that name was imported;
    ``from harness.quantize import quantize_activation`` keeps working."""
    out = _run(
        "import torch, harness\n"
        "from harness import MX_BLOCK, mx_spec\n"
        "x = torch.linspace(-3, 5, 2 * MX_BLOCK).reshape(2, MX_BLOCK)\n"
        "spec = mx_spec('e4m3fn', 'floor')\n"
        "a = harness.quantize(x, spec)\n"
        "import warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from harness.quantize import quantize_activation\n"
        "import harness.quantize as module\n"
        "b = harness.quantize(x, spec)\n"
        "print(callable(quantize_activation), module is harness.quantize,\n"
        "      torch.equal(a.codes, b.codes), torch.equal(a.scale, b.scale))"
    )
    assert out == "True True True True"


def test_old_quantize_module_warns_naming_the_front_door() -> None:
    """Importing the deprecated module warns once, as a DeprecationWarning that names the
    replacement; the front door's ``harness.quantize`` warns nothing."""
    out = _run(
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import harness\n"
        "    harness.quantize\n"
        "    print(len(caught))\n"
        "    import harness.quantize\n"
        "    import harness.quantize\n"
        "for w in caught:\n"
        "    print(w.category.__name__, '|', w.message)"
    )
    lines = out.splitlines()
    assert lines[0] == "0", out
    assert len(lines) == 2, out
    category, message = lines[1].split(" | ")
    assert category == "DeprecationWarning"
    assert "harness.quantize" in message
    assert "from harness " in message
    assert "harness.core.quantize" in message


def test_registries_build_no_path_at_import() -> None:
    """Importing the path registries (or the execution model) loads no path module and no
    capability probe; the built-ins are built on the first lookup."""
    out = _run(
        "import sys\n"
        "import harness.paths, harness.quantizers.base, harness.linear.paths, harness.moe.paths\n"
        "loaded = sorted(m for m in sys.modules if m.endswith(('.native', '.emulated')) or\n"
        "                m in ('harness.platform.capabilities', 'harness.ops.block_scaled'))\n"
        "print(loaded)\n"
        "from harness.linear.paths import linear_paths\n"
        "print(sorted(linear_paths()))"
    )
    assert out.splitlines() == ["[]", "['emulated', 'native']"]
