"""The golden store: committed safetensors files, their manifest, refresh and check.

Modules, each with its one job:

- ``golden``: The golden store (the committed "checkpoint" each suite loads; real checkpoint
  files are `harness/loading/checkpoint.py`): builders registered per entry, safetensors +
  `MANIFEST.json` (sha256, provenance, format 2: uint8 codes that fit in 4 or 6 bits stored
  packed by `harness/store/packing.py`, regenerable inputs stored as a sha256 that
  `regenerated` checks; docs/CLI.md#golden-store-format), integrity/staleness check. Refresh
  is locked (`flock` on the store directory; a concurrent one is refused) and journaled
  (`.refresh-journal/`, committed by writing its plan last; rolled forward or back by
  whoever opens the store next), so a kill leaves the store wholly old or wholly new; entry
  names are confined to the store; files are byte-reproducible (one metadata key).
- ``packing``: Lossless sub-byte storage of uint8 code tensors in golden files: codes that
  fit in 4 or 6 bits stored as a bit stream (format 2 of the manifest).
- ``atomic``: Atomic writes (temp file + fsync + `os.replace`) and atomic symlink
  replacement.
- ``tempfiles``: Temp files and staging directories named by their owner (`<host>-<pid>`),
  and the sweep that removes a dead writer's (a live one's never) on the next write into
  that directory.
- ``locations``: Where `suites/`, `golden/`, `benchmarks/` are: the checkout, or
  `harness/_shipped/` in a wheel (`setup.py` copies them in at build time).
- ``history``: The Parquet history store: one partition per run, added by staging + rename,
  idempotent, never deletes.
- ``repro``, ``bundle_names``: Repro bundles: a failing case's tensors + metadata as
  safetensors; their safe file names (`bundle_names`, no torch: the report links bundles by
  name).
"""
