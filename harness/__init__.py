"""qharness: numerical-correctness harness for low-precision quantized inference."""

__version__ = "0.1.0"
