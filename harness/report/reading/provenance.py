"""Where a run's numbers came from: commits and versions, stored with every run.

A regression is traced by what changed between two nights: the harness's commit, the engine
under test (its commit where it was installed from version control, or as the CI names it
in ``QHARNESS_ENGINE_COMMIT``), and the versions of every plugin and engine distribution:
the engines are those each installed adapter declares (`ENGINE_GROUP`) and the harness's own.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from harness.store.locations import CHECKOUT_ROOT, is_checkout
from harness.version import __version__

HARNESS_COMMIT_VARIABLE = "QHARNESS_COMMIT"
ENGINE_COMMIT_VARIABLE = "QHARNESS_ENGINE_COMMIT"
PLUGIN_GROUPS = ("qharness.paths", "qharness.moe_paths", "qharness.loaders", "qharness.quantizers")
ENGINE_GROUP = "qharness.engines"
"""Entry-point group by which an adapter declares the engine distributions it wraps: each
entry point's name is a distribution (its value the adapter's package, never loaded), so a
new engine is recorded without a harness file knowing it."""
# Distributions the harness itself runs, whatever adapter is installed: torch's Triton and
# the model suite's quantization tools and checkpoint format (harness.models.recipes).
HARNESS_DISTRIBUTIONS = (
    "triton",
    "pytorch-triton-rocm",
    "llmcompressor",
    "compressed-tensors",
    "amd-quark",
)


def _git_head() -> str | None:
    """The checkout's commit (None outside a git checkout or without git)."""
    if not (is_checkout() and (CHECKOUT_ROOT / ".git").exists()):
        return None
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=CHECKOUT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    head = done.stdout.strip()
    return head if done.returncode == 0 and head else None


def _vcs_commit(dist: metadata.Distribution) -> str | None:
    """The commit pip recorded for a distribution installed from version control."""
    try:
        text = dist.read_text("direct_url.json")
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id")
    except (OSError, ValueError, AttributeError):
        return None
    return str(commit) if commit else None


def _distribution(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def plugin_distributions() -> dict[str, metadata.Distribution]:
    """Distributions that register qharness plugins, by name."""
    found: dict[str, metadata.Distribution] = {}
    for group in PLUGIN_GROUPS:
        for ep in metadata.entry_points(group=group):
            dist = getattr(ep, "dist", None)
            if dist is not None:
                found[dist.metadata["Name"]] = dist
    return found


def engine_distributions() -> tuple[str, ...]:
    """Names of the distributions whose versions a result depends on: the harness's own
    (`HARNESS_DISTRIBUTIONS`) and those the installed adapters declare (`ENGINE_GROUP`),
    read from metadata alone (no adapter is imported)."""
    declared = (ep.name for ep in metadata.entry_points(group=ENGINE_GROUP))
    return tuple(sorted({*HARNESS_DISTRIBUTIONS, *declared}))


def collect_provenance(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``provenance`` object of a results file (every value a string or null)."""
    env = os.environ if environ is None else environ
    own = _distribution("qharness")
    plugins = plugin_distributions()
    engines = {n: d for n in engine_distributions() if (d := _distribution(n)) is not None}
    commits = {
        name: commit
        for name, dist in sorted({**engines, **plugins}.items())
        if (commit := _vcs_commit(dist))
    }
    return {
        "qharness": __version__,
        "harness_commit": env.get(HARNESS_COMMIT_VARIABLE)
        or _git_head()
        or (_vcs_commit(own) if own is not None else None),
        "engine_commit": env.get(ENGINE_COMMIT_VARIABLE) or None,
        "plugins": {name: dist.version for name, dist in sorted(plugins.items())},
        "engines": {name: dist.version for name, dist in sorted(engines.items())},
        "commits": commits,
    }
