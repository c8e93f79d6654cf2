"""Quantizer cases: the MX scale edge-case blocks and their goldens."""
