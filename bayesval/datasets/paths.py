"""Where the shared data files live: an explicit path, or $BAYESVAL_DATA, or ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def data_file(name: str, data_dir: str | Path | None = None) -> Path:
    """Path of the shared data file `name`; a clear FileNotFoundError when it is absent.

    Looked up in `data_dir`, else $BAYESVAL_DATA, else ../shared/data beside the checkout.
    Nothing is ever downloaded.
    """
    root = Path(data_dir) if data_dir is not None else Path(os.environ.get("BAYESVAL_DATA", _DEFAULT))
    path = root / name
    if not path.exists():
        raise FileNotFoundError(
            f"data file {name!r} not found at {path}; pass data_dir=... or set BAYESVAL_DATA "
            "to the folder holding the shared data (see ../shared/data/README.md)"
        )
    return path
