"""The history store: one Parquet file per run under ``<dir>/run=<run-id>/``.

Adding a run writes its partition to a staging directory and renames it into place, so a
reader sees a whole run or none of it; a run already present is left as it is (adding the
same run twice keeps one copy). A staging directory a killed ``add`` left behind is never
read as a run, and the next ``add`` removes it (`harness.store.tempfiles`: its owner is
gone). Nothing here ever deletes a stored run. The table's columns
and their meaning are the caller's (`harness.report.reading.frame`), documented in docs/HISTORY.md.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import QHarnessError
from harness.store.tempfiles import make_temp_dir, sweep_stale

PARTITION_PREFIX = "run="
DATA_FILE = "data.parquet"
_SAFE_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


class HistoryError(QHarnessError):
    """The history directory cannot be used (not a directory, unreadable partition)."""


class HistoryStore:
    """Runs stored as Parquet partitions, one per run id."""

    def __init__(self, root: Path, schema_name: str) -> None:
        self.root = Path(root)
        self.schema_name = schema_name
        try:
            os.stat(self.root)
        except OSError as exc:  # pathlib's exists() reads a loop as "absent"
            if exc.errno == errno.ELOOP:
                raise HistoryError(f"history {self.root} is a symlink loop") from None
        if self.root.exists() and not self.root.is_dir():
            raise HistoryError(f"history {self.root} exists and is not a directory")

    def _partition(self, run_id: str) -> Path:
        if not _SAFE_RUN_ID.fullmatch(run_id) or ".." in run_id:
            raise HistoryError(f"run id {run_id!r} is not a plain name")
        return self.root / f"{PARTITION_PREFIX}{run_id}"

    def run_ids(self) -> list[str]:
        """Stored run ids, sorted (run ids start with their UTC time). A directory whose
        name no run id can have (a copy made by hand) is not a run: it is left out rather
        than stopping every report that reads the history."""
        if not self.root.is_dir():
            return []
        found = (
            p.parent.name.removeprefix(PARTITION_PREFIX)
            for p in self.root.glob(f"{PARTITION_PREFIX}*/{DATA_FILE}")
            if p.is_file()
        )
        return sorted(r for r in found if _SAFE_RUN_ID.fullmatch(r) and ".." not in r)

    def __contains__(self, run_id: str) -> bool:
        return (self._partition(run_id) / DATA_FILE).is_file()

    def add(self, run_id: str, frame: pd.DataFrame) -> bool:
        """Store ``frame`` as run ``run_id``; False (and nothing written) if already stored."""
        target = self._partition(run_id)
        if (target / DATA_FILE).is_file():
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        sweep_stale(self.root)  # what a killed add left staged
        staging = make_temp_dir(self.root, "staging")
        try:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            table = table.replace_schema_metadata(
                {**(table.schema.metadata or {}), b"qharness.schema": self.schema_name.encode()}
            )
            pq.write_table(table, staging / DATA_FILE)
            try:
                os.rename(staging, target)  # fails if a concurrent writer got there first
            except OSError:
                if (target / DATA_FILE).is_file():
                    return False
                raise
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        return True

    def load(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        """The stored rows of ``run_ids`` (default: all runs), concatenated."""
        ids = self.run_ids() if run_ids is None else run_ids
        tables = []
        for run_id in ids:
            path = self._partition(run_id) / DATA_FILE
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                raise HistoryError(f"history partition {path} is unreadable: {exc}") from exc
            stored = (table.schema.metadata or {}).get(b"qharness.schema", b"").decode()
            if stored != self.schema_name:
                raise HistoryError(f"{path}: schema {stored!r}, expected {self.schema_name!r}")
            tables.append(table)
        if not tables:
            return pd.DataFrame()
        try:  # one conversion for all runs: far cheaper than concatenating frames
            return pa.concat_tables(tables, promote_options="default").to_pandas()
        except pa.ArrowException as exc:
            raise HistoryError(
                f"history {self.root}: runs with incompatible columns ({exc})"
            ) from exc
