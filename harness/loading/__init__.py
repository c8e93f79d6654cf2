"""Checkpoint loading: the checkpoint files, post-load transforms, loaders, invariants
and cases."""

from harness.loading.loaders import LoadedLayer, Loader, get_loader, loaders

__all__ = ["LoadedLayer", "Loader", "get_loader", "loaders"]
