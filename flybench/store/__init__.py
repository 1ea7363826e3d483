"""DuckDB store built from asv results: schema, idempotent ingest, shared queries."""

from flybench.store.db import DEFAULT_DB, connect
from flybench.store.ingest import FileError, IngestReport, ingest

__all__ = ["DEFAULT_DB", "FileError", "IngestReport", "connect", "ingest"]
