"""Every Python block of README.md and docs/*.md runs as written (in a scratch directory: blocks may write files).
docs/user_models.md's block runs in tests/test_user_model.py, which also checks its numbers; docs/multihost.md's
launch recipe needs two processes, and tests/test_multiprocess.py runs its steps in two."""

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED_ELSEWHERE = {"docs/user_models.md", "docs/multihost.md"}


def blocks() -> list:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        name = str(path.relative_to(ROOT))
        if name in CHECKED_ELSEWHERE:
            continue
        for number, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S)):
            found.append(pytest.param(name, code, id=f"{name}#{number + 1}"))
    return found


@pytest.mark.parametrize("source, code", blocks())
def test_block_runs(source, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # convergence and reuse notes are the block's own output
        try:
            exec(compile(code, f"{source} (code block)", "exec"), {"__name__": "__doc_block__"})
        except FileNotFoundError as missing:
            if "BAYESVAL_DATA" in str(missing) or "shared/data" in str(missing):
                pytest.skip(f"{source}: its data file is not available: {missing}")
            raise
