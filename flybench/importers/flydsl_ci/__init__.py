"""FlyDSL's CI dashboard history (`history.json` of the `ci-dashboard-data` branch, schema 1).

`flybench import flydsl-ci FILE [--flydsl-repo CLONE]`; see docs/flydsl-ci-study.md.
"""

from flybench.importers.flydsl_ci.store import SOURCE, ImportReport, import_file

__all__ = ["SOURCE", "ImportReport", "import_file"]
