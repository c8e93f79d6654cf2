"""Mixture of experts: the block's model and reference, error bounds, dispatch table,
paths, cases and goldens."""
