"""Make (or find in the cache) one checkpoint, in the tool's own venv.

    python -m harness.models.make MODEL RECIPE [MODEL RECIPE ...]

Prints one JSON line per pair: ``{"model", "recipe", "float": <folder>, "quantized":
<folder>}``. `harness.models.cache`
runs this with ``QHARNESS_TOOL_PYTHON`` when the tool is not importable in the engine's venv.
"""

from __future__ import annotations

import argparse
import json

from harness.models.cache import float_checkpoint, quantized_checkpoint
from harness.models.recipes import RECIPES
from harness.models.tiny import MODELS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("pairs", nargs="+", help="MODEL RECIPE [MODEL RECIPE ...]")
    args = parser.parse_args(argv)
    if len(args.pairs) % 2:
        parser.error("give MODEL RECIPE pairs")
    for name, recipe_name in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        if name not in MODELS or recipe_name not in RECIPES:
            parser.error(f"unknown model {name!r} or recipe {recipe_name!r}")
        model, recipe = MODELS[name], RECIPES[recipe_name]
        folders = {
            "model": name,
            "recipe": recipe_name,
            "float": str(float_checkpoint(model)),
            "quantized": str(quantized_checkpoint(model, recipe)),
        }
        print(json.dumps(folders), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
