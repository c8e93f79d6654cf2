"""The golden store: committed safetensors files, their manifest, refresh and check."""
