"""`flybench export`: the store's rows as Parquet or CSV files, for DuckDB or another engine to query in place."""

from __future__ import annotations

import argparse
from pathlib import Path

from flybench.cli._output import output_folder, output_path
from flybench.errors import FlybenchError
from flybench.store import DEFAULT_DB
from flybench.store.export import FORMATS, PARTITIONS, export_rows, export_store


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "export", help="write a query's rows, a table or the whole store as Parquet or CSV",
        description="Write the rows of a query or of one table to a Parquet or CSV file (--output), or the whole "
                    f"store as Parquet under a new folder (--dir): results partitioned by {', '.join(PARTITIONS)} "
                    "(hive style, subject=.../machine=.../month=YYYY-MM/), every other table a file. DuckDB then "
                    "queries it in place: SELECT ... FROM read_parquet('DIR/results/**/*.parquet', "
                    "hive_partitioning = true). The database is only read. Exit status: 0 written, 2 bad input.")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", help="one SELECT over the store's tables, e.g. \"SELECT * FROM results WHERE "
                                      "machine = 'x'\"; it reads only the store's tables: no file on disk, URL or "
                                      "other database (read_text, read_csv, read_parquet ... are refused, exit 2)")
    what.add_argument("--table", help="one table of the store, e.g. results or commits")
    what.add_argument("--dir", type=output_folder, help="export the whole store as Parquet into this new (or empty) folder; "
                                               "the same command again finishes an export that stopped partway")
    parser.add_argument("--output", type=output_path, help="the file to write, with --query or --table")
    parser.add_argument("--format", choices=FORMATS, default="parquet", help="file format (default: parquet)")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    return parser


def main(args: argparse.Namespace) -> int:
    if args.dir is not None:
        if args.format != "parquet" or args.output is not None:
            raise FlybenchError("--dir exports the whole store as Parquet files into that folder: leave out "
                                "--output and --format csv, or export one --query or --table to a file")
        written = export_store(args.db, args.dir)
        print(f"exported {len(written)} tables of {args.db} to {args.dir}: "
              + ", ".join(f"{table} {rows:,} rows" for table, rows in written.items()))
        return 0
    if args.output is None:
        raise FlybenchError("--output FILE is needed with --query or --table: where the rows go")
    rows = export_rows(args.db, args.output, args.format, query=args.query, table=args.table)
    print(f"wrote {rows:,} rows to {args.output} ({args.format})")
    return 0
