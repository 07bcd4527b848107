"""A party's records from a CSV or Parquet file, checked: every problem is one line naming the file and the column.

`read_table(path, target)` returns the features X (rows, features), the target y and the feature column names;
`read_tables(paths, target)` reads several parties and checks that they share their feature columns, in order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def read_table(path: str | Path, target: str, features: list[str] | None = None):
    """(X, y, feature names) of one file: `target` is y, `features` (default: every other column) are X."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise ValueError(f"{path}: not a table file (expected one of {', '.join(TABLE_SUFFIXES)})")
    try:
        frame = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ImportError, OSError) as error:
        raise ValueError(f"{path}: cannot be read as a table: {str(error).splitlines()[0]}") from None
    if frame.empty:
        raise ValueError(f"{path}: has no records (a header at most)")
    if target not in frame.columns:
        raise ValueError(f"{path}: has no target column {target!r}; its columns are {list(map(str, frame.columns))}")
    columns = [c for c in frame.columns if c != target] if features is None else list(features)
    unknown = [c for c in columns if c not in frame.columns]
    if unknown:
        raise ValueError(f"{path}: has no feature column(s) {unknown}; its columns are {list(map(str, frame.columns))}")
    if not columns:
        raise ValueError(f"{path}: has no feature columns besides the target {target!r}")
    for column in [*columns, target]:
        values = frame[column]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            numbers = pd.to_numeric(values, errors="coerce")
            row = int(np.flatnonzero(numbers.isna() & values.notna())[0]) if values.notna().any() else 0
            raise ValueError(
                f"{path}: column {column!r} is not numeric (row {row + 1} holds {values.iloc[row]!r}); encode it as "
                "numbers or leave it out with --features"
            )
        missing = np.flatnonzero(values.isna().to_numpy())
        if missing.size:
            rows = ", ".join(str(r + 1) for r in missing[:5]) + (" ..." if missing.size > 5 else "")
            raise ValueError(f"{path}: column {column!r} has {missing.size} empty or NaN cell(s) (rows {rows})")
    return frame[columns].to_numpy(np.float64), frame[target].to_numpy(np.float64), [str(c) for c in columns]


def read_tables(paths, target: str, features: list[str] | None = None):
    """[(X, y)] of several parties' files, which must share their feature columns (same names, same order)."""
    tables, first = [], None
    for path in paths:
        X, y, columns = read_table(path, target, features)
        if first is None:
            first = (path, columns)
        elif columns != first[1]:
            raise ValueError(
                f"{path}: its feature columns {columns} differ from those of {first[0]} {first[1]}; every party "
                "needs the same columns in the same order"
            )
        tables.append((X, y))
    return tables, first[1]
