"""The suite's two tiers (docs/benchmarks.md, "The test suite in two tiers"): the slow tier is exactly the tests
tests/conftest.py names in SLOW, so a renamed or removed test cannot leave the list, or a slow test move into the
quick suite, unnoticed."""

import subprocess
import sys
from pathlib import Path

from conftest import SLOW

TESTS = Path(__file__).resolve().parent


def test_the_slow_tier_is_the_tests_slow_names_and_the_quick_suite_leaves_them_out(request):
    modules = sorted({name.split("::")[0] for name in SLOW})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "slow"]
        + [str(TESTS / module) for module in modules],
        capture_output=True,
        text=True,
        cwd=TESTS.parent,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    slow = {line.split("/", 1)[1] for line in run.stdout.splitlines() if line.startswith("tests/")}
    assert slow == set(SLOW)
    running = {f"{item.path.name}::{item.name}" for item in request.session.items}  # this session's tests
    assert not running & slow
