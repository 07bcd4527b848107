"""A party's records from a CSV (or gzipped CSV, .csv.gz) or Parquet file, checked as a table: every problem is one
line naming the file, the column and, for a cell, its row (1 = the first row below the header).

`read_table(path, target)` returns the features X (rows, features), the target y and the feature column names;
`read_tables(paths, target)` reads several parties and checks that they share their feature columns, in order.

What a table must be (README, "Across machines"): each column used (the target and the features) has a name of its
own in the header, holds numbers and has no empty cell. True/False columns are read as 1/0: a boolean feature is a
0/1 indicator, as `Party` takes boolean X, and a True/False target is a 0/1 label. Refused, each naming the column:
a header name that appears twice (pandas would silently read the second as `name.1`), a column without a name
(the row index `DataFrame.to_csv` writes unless `index=False`, which pandas reads as `Unnamed: 0`), rows with more
fields than the header (pandas would take the first as the row index), the target listed among the features, an
infinite cell, and a column typed as something other than numbers however its cells look (dates and times, which
pandas would turn into nanoseconds, durations, categories); a damaged Parquet file is refused in our own words.
`check_class_labels` refuses a continuous target where a classifier needs class labels.
"""

from __future__ import annotations

import os
import warnings
import zlib
from pathlib import Path

import numpy as np

TABLE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")
PARQUET_INDEX = "__index_level_0__"  # the index column of a Parquet file written without pandas' metadata


def read_table(path: str | Path, target: str, features: list[str] | None = None):
    """(X, y, feature names) of one file: `target` is y, `features` (default: every other column) are X."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a table file's path (a str or a Path), got {path!r} ({type(path).__name__})")
    path = Path(path)
    _check_names(target, features)
    frame, header = _read(path)
    if target not in frame.columns:
        columns = list(map(str, frame.columns))
        other = next(
            (f" (is it separated by {s!r}?)" for s in (";", "\t", "|") if len(columns) == 1 and s in columns[0]), ""
        )
        raise ValueError(f"{path}: has no target column {target!r}; its columns are {columns}{other}")
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
    """[(X, y)] of several parties' files, which must share their feature columns (same names, same order) and hold
    different data: two files of the same rows (one table under two paths, or a copy) are one party's data given
    twice, which would be valued as two parties and, released here, spend its privacy twice uncounted."""
    if not isinstance(paths, (list, tuple)):
        if not isinstance(paths, (str, os.PathLike)):
            raise TypeError(f"paths must be a list of table files, got {paths!r} ({type(paths).__name__})")
        raise TypeError(
            f"paths must be a list of table files, got the single path {str(paths)!r}; pass [{str(paths)!r}]"
        )
    paths = list(paths)
    if not paths:
        raise ValueError("paths is empty: give one table file per party")
    tables, first, read = [], None, {}
    for path in paths:
        X, y, columns = read_table(path, target, features)
        if first is None:
            first = (path, columns)
        elif columns != first[1]:
            raise ValueError(
                f"{path}: its feature columns {columns} differ from those of {first[0]} {first[1]}; every party "
                "needs the same columns in the same order"
            )
        table = np.column_stack([X, y])
        rows = (table.shape, table[np.lexsort(table.T[::-1])].tobytes())  # the rows, whatever their order
        if rows in read:
            raise ValueError(
                f"{path}: holds exactly the rows of {read[rows]} (the same target and features, in any order): "
                "the same data is given twice; give each table once"
            )
        read[rows] = path
        tables.append((X, y))
    return tables, first[1]


def _check_names(target, features) -> None:
    """The target is a column name, and the features a list of them (a header's names are strings)."""
    if not isinstance(target, str):
        raise TypeError(f"target must be a column name (a str), got {target!r} ({type(target).__name__})")
    if isinstance(features, str):
        raise TypeError(f"features must be a list of column names, got the string {features!r}; pass [{features!r}]")
    if not (features is None or isinstance(features, (list, tuple))):
        raise TypeError(f"features must be a list of column names, got {features!r} ({type(features).__name__})")
    wrong = [name for name in features or () if not isinstance(name, str)]
    if wrong:
        raise TypeError(f"features must be column names (strings), got {wrong[0]!r} ({type(wrong[0]).__name__})")


def is_table(path: str | Path) -> bool:
    """Whether `path` is named as a table file (one of `TABLE_SUFFIXES`, case-insensitive)."""
    return Path(path).name.lower().endswith(TABLE_SUFFIXES)


def check_class_labels(
    path: str | Path, column: str, y: np.ndarray, classes: tuple[float, ...] | None = None, wanted: str = ""
) -> None:
    """Refuse a target column that is not class labels: non-integer values (a continuous target), or, given
    `classes`, a value outside them (`wanted` says what is wanted); the message names the file, the column and the
    first such row (1 = the first below the header)."""
    outside = ~np.isin(y, classes) if classes is not None else y != np.round(y)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        wanted = wanted or ("class labels (integers)" if classes is None else "/".join(map(str, classes)) + " labels")
        continuous = "; a continuous target is a regression target, not classes" if y[row] != np.round(y[row]) else ""
        raise ValueError(
            f"{path}: target column {column!r} must hold {wanted}, but row {row + 1} holds {y[row]:g}{continuous}"
        )


def _read(path: Path):
    """The file as a DataFrame, and its header as written (None where a name is missing), aligned with the columns."""
    import pandas as pd

    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a table file")
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    if not is_table(path):
        raise ValueError(f"{path}: not a table file (expected one of {', '.join(TABLE_SUFFIXES)})")
    try:
        if path.name.lower().endswith((".csv", ".csv.gz")):  # pandas decompresses a .csv.gz
            with warnings.catch_warnings():  # rows longer than the header: pandas warns that it drops fields
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = pd.read_csv(path, index_col=False)  # never a column as the row index
            written = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0]  # as written: no renaming
            header = [None if pd.isna(name) else name for name in written]
        else:
            frame = _read_parquet(path)
            header = [None if name == PARQUET_INDEX else name for name in frame.columns]
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except pd.errors.ParserWarning:
        raise ValueError(
            f"{path}: some rows have more fields than the header has names; give every column a name"
        ) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ImportError, OSError, EOFError, zlib.error) as error:
        # EOFError and zlib.error: a .csv.gz cut short or damaged
        raise ValueError(f"{path}: cannot be read as a table: {str(error).splitlines()[0]}") from None
    if frame.empty:
        raise ValueError(f"{path}: has no records (a header at most)")
    return frame, header


def _read_parquet(path: Path):
    """The Parquet file as a DataFrame; a file that is not Parquet (or a damaged one) is one line naming it."""
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except ImportError:
        raise
    except Exception as error:  # pyarrow's ArrowInvalid, OSError or its own exceptions for a damaged file
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{path}: is not a readable Parquet file (damaged, or another format): {reason}") from None


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
    _check_numeric_type(path, column, values.dtype)
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
    numbers = numbers.to_numpy(np.float64)
    for bad, what in ((np.isnan(numbers), "empty or NaN"), (np.isinf(numbers), "infinite")):
        rows = np.flatnonzero(bad)
        if rows.size:
            shown = ", ".join(str(r + 1) for r in rows[:5]) + (" ..." if rows.size > 5 else "")
            raise ValueError(f"{path}: column {column!r} has {rows.size} {what} cell(s) (rows {shown})")
    return numbers


def _check_numeric_type(path: Path, column, dtype) -> None:
    """Refuse a column whose type is not numbers however its cells look: dates and times (pandas would give their
    nanoseconds), durations, categories, complex numbers."""
    import pandas as pd

    kinds = {"M": "dates and times", "m": "time durations", "c": "complex numbers"}
    types = {pd.CategoricalDtype: "categories", pd.PeriodDtype: "time periods", pd.IntervalDtype: "intervals"}
    what = kinds.get(getattr(dtype, "kind", "")) or next((w for t, w in types.items() if isinstance(dtype, t)), None)
    if what:
        raise ValueError(
            f"{path}: column {column!r} holds {what} ({dtype}), not numbers; encode it as numbers (for a date, e.g. "
            "days since a start) or leave it out with --features"
        )
