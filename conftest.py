"""Repository-level pytest configuration.

The qharness plugin itself (fixtures, result recording) is installed through the
``pytest11`` entry point when the package is installed (`pip install -e .`); nothing more
is needed here. This file marks the repository root as pytest's rootdir, so the default
golden store is ``<repo>/golden``.
"""
