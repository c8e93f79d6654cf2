"""The golden store: committed safetensors files, their manifest, refresh and check.

Modules, each with its one job:

- ``golden``: The public names of the golden store (the committed "checkpoint" each suite
  loads; real checkpoint files are `harness/loading/checkpoint.py`), re-exported from the
  modules below, one job each.
- ``golden_registry``: builders registered per entry, the `GoldenData` they return,
  regenerable inputs stored as a sha256 (`tensor_digest`) that `regenerated` checks.
- ``golden_format``: safetensors + `MANIFEST.json` (sha256, provenance, format 2: uint8 codes
  that fit in 4 or 6 bits stored packed by `packing`; docs/CLI.md#golden-store-format),
  files byte-reproducible (one metadata key), entry names confined to the store.
- ``golden_diff``: how recomputed tensors differ (exact ones bit for bit, references by
  float32 ULPs).
- ``golden_store``: `GoldenStore`, each entry read against its manifest sha256, the
  integrity/staleness check.
- ``golden_refresh``: recompute, diff and commit the selected entries.
- ``golden_journal``: the refresh's lock (`flock` on the store directory; a concurrent one is
  refused) and journal (`.refresh-journal/`, committed by writing its plan last; rolled
  forward or back by whoever opens the store next), so a kill leaves the store wholly old
  or wholly new.
- ``golden_errors``: the store's errors and the refresh commands their messages suggest.
- ``packing``: Lossless sub-byte storage of uint8 code tensors in golden files: codes that
  fit in 4 or 6 bits stored as a bit stream (format 2 of the manifest).
- ``atomic``: Atomic writes (temp file + fsync + `os.replace`) and atomic symlink
  replacement.
- ``tempfiles``: Temp files and staging directories named by their owner (`<host>-<pid>`),
  and the sweep that removes a dead writer's (a live one's never, nor any name without the
  owner stamp), each named on stderr, on the next write into that directory.
- ``locations``: Where `suites/`, `golden/`, `benchmarks/` are: the checkout, or
  `harness/_shipped/` in a wheel (`setup.py` copies them in at build time).
- ``history``: The Parquet history store: one partition per run, added by staging + rename,
  idempotent, never deletes.
- ``repro``, ``bundle_names``: Repro bundles: a failing case's tensors + metadata as
  safetensors; their safe file names (`bundle_names`, no torch: the report links bundles by
  name).
"""
