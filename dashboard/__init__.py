"""flybench's Streamlit dashboard over the DuckDB store; `app.py` is the entry point, `views/` the pages."""
