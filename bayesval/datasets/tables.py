"""A party's records from a CSV or Parquet file, checked as a table: every problem is one line naming the file and
the column.

`read_table(path, target)` returns the features X (rows, features), the target y and the feature column names;
`read_tables(paths, target)` reads several parties and checks that they share their feature columns, in order.

What a table must be (README, "Across machines"): each column used (the target and the features) has a name of its
own in the header, holds numbers and has no empty cell. True/False columns are read as 1/0: a boolean feature is a
0/1 indicator, as `Party` takes boolean X, and a True/False target is a 0/1 label. Refused, each naming the column:
a header name that appears twice (pandas would silently read the second as `name.1`), a column without a name
(the row index `DataFrame.to_csv` writes unless `index=False`, which pandas reads as `Unnamed: 0`), rows with more
fields than the header (pandas would take the first as the row index), and the target listed among the features.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
PARQUET_INDEX = "__index_level_0__"  # the index column of a Parquet file written without pandas' metadata


def read_table(path: str | Path, target: str, features: list[str] | None = None):
    """(X, y, feature names) of one file: `target` is y, `features` (default: every other column) are X."""
    path = Path(path)
    frame, header = _read(path)
    if target not in frame.columns:
        raise ValueError(f"{path}: has no target column {target!r}; its columns are {list(map(str, frame.columns))}")
    columns = [c for c in frame.columns if c != target] if features is None else _listed(path, features, target)
    unknown = [c for c in columns if c not in frame.columns]
    if unknown:
        raise ValueError(f"{path}: has no feature column(s) {unknown}; its columns are {list(map(str, frame.columns))}")
    if not columns:
        raise ValueError(f"{path}: has no feature columns besides the target {target!r}")
    _check_header(path, list(frame.columns), header, used={*columns, target})
    X = np.column_stack([_numbers(path, frame, column) for column in columns])
    return X, _numbers(path, frame, target), [str(c) for c in columns]


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


def _read(path: Path):
    """The file as a DataFrame, and its header as written (None where a name is missing), aligned with the columns."""
    import pandas as pd

    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path}: not a table file (expected one of {', '.join(TABLE_SUFFIXES)})")
    try:
        if suffix == ".csv":
            with warnings.catch_warnings():  # rows longer than the header: pandas warns that it drops fields
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = pd.read_csv(path, index_col=False)  # never a column as the row index
            written = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0]  # as written: no renaming
            header = [None if pd.isna(name) else name for name in written]
        else:
            frame = pd.read_parquet(path)
            header = [None if name == PARQUET_INDEX else name for name in frame.columns]
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except pd.errors.ParserWarning:
        raise ValueError(
            f"{path}: some rows have more fields than the header has names; give every column a name"
        ) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ImportError, OSError) as error:
        raise ValueError(f"{path}: cannot be read as a table: {str(error).splitlines()[0]}") from None
    if frame.empty:
        raise ValueError(f"{path}: has no records (a header at most)")
    return frame, header


def _listed(path: Path, features, target: str) -> list:
    """The feature columns asked for: each once, and not the target."""
    columns = list(features)
    if target in columns:
        raise ValueError(
            f"{path}: the target column {target!r} is also listed among the features; a model cannot take its own "
            "target as a feature"
        )
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ValueError(f"{path}: the features list column(s) {twice} more than once")
    return columns


def _check_header(path: Path, columns: list, header: list, used: set) -> None:
    """Each used column has a name, and one that no other column has."""
    for position, (column, name) in enumerate(zip(columns, header), start=1):
        if column not in used:
            continue
        if name is None:
            raise ValueError(
                f"{path}: column {position} has no name in the header (pandas calls it {column!r}); it is usually the "
                "row index DataFrame.to_csv writes unless index=False: drop it, or choose the columns with --features"
            )
        copies = [i for i, other in enumerate(header, start=1) if other == name]
        if len(copies) > 1:
            renamed = [str(columns[i - 1]) for i in copies]
            raise ValueError(
                f"{path}: column name {name!r} appears {len(copies)} times in the header (columns {copies}; pandas "
                f"would read them as {renamed}): give each column a name of its own"
            )


def _numbers(path: Path, frame, column) -> np.ndarray:
    """The column as float64: numbers as they are, True/False as 1/0; text or an empty cell is refused."""
    import pandas as pd

    values = frame[column]
    present = values.dropna()
    if pd.api.types.is_bool_dtype(values) or (len(present) and all(isinstance(v, (bool, np.bool_)) for v in present)):
        numbers = values.astype("float64")  # True/False as 1/0, an empty cell of an object column as NaN
    elif pd.api.types.is_numeric_dtype(values):
        numbers = values
    else:
        numbers = pd.to_numeric(values, errors="coerce")
        text = np.flatnonzero(numbers.isna() & values.notna())
        if text.size:
            raise ValueError(
                f"{path}: column {column!r} is not numeric (row {text[0] + 1} holds {values.iloc[text[0]]!r}); encode "
                "it as numbers or leave it out with --features"
            )
    missing = np.flatnonzero(numbers.isna().to_numpy())
    if missing.size:
        rows = ", ".join(str(r + 1) for r in missing[:5]) + (" ..." if missing.size > 5 else "")
        raise ValueError(f"{path}: column {column!r} has {missing.size} empty or NaN cell(s) (rows {rows})")
    return numbers.to_numpy(np.float64)
