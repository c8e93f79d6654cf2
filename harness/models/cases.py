"""The model suite's case: a tiny model quantized by one tool preset, and the layer or MoE
block a test looks at ("" for the whole model). Its record fields are what the report's
models section groups by (harness/report/model/models_section.py: one row per model x tool x
preset); each test adds the check it runs as ``model_check``."""

from __future__ import annotations

from dataclasses import dataclass

from harness.models.recipes import RECIPES, Recipe
from harness.paths.case import Case


@dataclass(frozen=True)
class ModelCase(Case):
    SUITE = "models"
    ID = ("model", "recipe", "part")
    RECORD = ("model", "tool", "preset", "scheme")

    model: str
    recipe: str
    part: str = ""  # a layer or a MoE block; "" for the whole model

    @property
    def made_by(self) -> Recipe:
        return RECIPES[self.recipe]

    @property
    def tool(self) -> str:
        return self.made_by.tool

    @property
    def preset(self) -> str:
        """The tool's preset, with the recipe's layer selection where it has one."""
        return self.made_by.label

    @property
    def scheme(self) -> str:
        return self.made_by.scheme
