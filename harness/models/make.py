"""Make (or find in the cache) one checkpoint, in the tool's own venv.

    python -m harness.models.make MODEL RECIPE

Prints one JSON line: ``{"float": <folder>, "quantized": <folder>}``. `harness.models.cache`
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
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("recipe", choices=sorted(RECIPES))
    args = parser.parse_args(argv)
    model, recipe = MODELS[args.model], RECIPES[args.recipe]
    folders = {
        "float": str(float_checkpoint(model)),
        "quantized": str(quantized_checkpoint(model, recipe)),
    }
    print(json.dumps(folders))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
