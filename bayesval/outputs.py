"""Output files: checked before the work whose result they keep, and written whole or not at all.

A valuation's saved result may hold the only record of the releases it made, and a release file is what a party
publishes. So a path that cannot be written is refused before the sampling or the release starts
(`check_output_path`: the folder is tried with an empty file, since `os.access` says yes to a superuser, and on
/proc, /sys or a read-only mount), and a file is written beside its destination under a temporary name and renamed
onto it once complete (`write_whole`): a full disk or a crash leaves the earlier file or none, never a part of one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from bayesval.validation import describe_value, show_value

IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".tif", ".tiff", ".eps", ".ps", ".webp", ".gif")


def check_output_path(name: str, path, *, suffixes: tuple[str, ...] = ()) -> Path:
    """`path` as a file that can be written now: a str or path-like, not a directory, in a directory that exists and
    takes a new file, and ending in one of `suffixes` where given (case-insensitive). Checked before the work whose
    result it keeps, so that a bad path costs nothing; `name` is the argument as the caller knows it (`path`,
    `--plot`)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path (a str or a Path), got {describe_value(path)}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip() or "\0" in text:
        raise ValueError(f"{name} must be a file path, got {show_value(text)}")
    path = Path(text)
    try:
        _check_writable(name, text, path, suffixes)
    except OSError as error:  # a name too long for the file system, a broken mount, a folder that takes no file
        raise ValueError(f"{name} {text!r} cannot be written: {error.strerror or error}; choose another path") from None
    return path


def _check_writable(name: str, text: str, path: Path, suffixes: tuple[str, ...]) -> None:
    if path.is_dir():
        raise ValueError(f"{name} {text!r} is a directory; give a file name inside it")
    folder = path.parent
    if not folder.is_dir():
        what = "is not a directory" if folder.exists() else "does not exist"
        raise ValueError(f"{name} {text!r}: the directory {str(folder)!r} {what}; create it or choose another path")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{name} {text!r}: no permission to write there; choose another path")
    if suffixes and not path.name.lower().endswith(suffixes):
        raise ValueError(f"{name} {text!r} has no known extension: end it in one of {', '.join(suffixes)}")
    os.unlink(_new_partial(path))  # the folder takes a new file (what `write_whole` will make there)


def _new_partial(path: Path) -> Path:
    """An empty new file beside `path`, hidden, with its suffix (so that a writer that reads the format from the
    name reads the right one) and the permissions a new file gets (0o666 less the umask)."""
    partial = path.with_name(f".{path.name}.partial-{secrets.token_hex(4)}{path.suffix}")
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return partial


def write_whole(path: Path, write: Callable[[Path], object]) -> Path:
    """Write `path` whole or not at all: `write(partial)` writes the content to a new file beside it, which is
    flushed to the disk and then renamed onto `path` (`os.replace`, atomic within a file system). On any failure
    the partial file is removed and the error raised; `path` is as it was. Returns `path`."""
    partial = _new_partial(path)
    try:
        write(partial)
        with open(partial, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
    return path


__all__ = ["IMAGE_SUFFIXES", "check_output_path", "write_whole"]
