"""Thin glue over torch kernels (block-scaled and grouped GEMMs): argument layouts only,
no policy; shared by the paths and the capability probes."""
