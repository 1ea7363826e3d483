"""FlyDSL's CI history as a test bed for flybench's regression detection: docs/flydsl-ci-study.md.

`python -m studies.flydsl_ci` (`__main__`) runs the study. `data` reads the imported history back from the
store; `steps` replays the history detector night by night and checks its steps against evidence; `flags`
judges FlyDSL's own 3% rule; `sweep` searches the detector's thresholds; `tables` and `figures` render the
results; `doc.md` is the prose of the page, filled in by the run.
"""
