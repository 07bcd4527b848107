"""The example scripts run at a tiny budget through their NumPyro-style flags and import only the public API.
calih_thinning.py and syn_rewards.py are checked for their imports only: CaliH's 6-feature program costs a minute
of compile, and the rewards notebook runs the same sweep."""

import subprocess
import sys
from pathlib import Path

import pytest
from public_api import internal_imports

from bayesval.datasets.paths import data_file

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TINY = ["--num-chains", "2", "--num-warmup", "20", "--num-samples", "40", "--num-repeats", "2"]
RUNS = {
    "syn_privacy_tradeoff.py": TINY,
    "many_parties.py": [*TINY, "--tolerance", "0.5", "--max-permutations", "8"],
    "diab_privacy_tradeoff.py": [*TINY, "--epsilon-2", "12.5"],
}
NEEDS = {"diab_privacy_tradeoff.py": "pima_indians_diabetes.csv"}
EXPECT = {"syn_privacy_tradeoff.py": "[0,100]", "many_parties.py": "party 3", "diab_privacy_tradeoff.py": "MNLP_N"}


@pytest.mark.parametrize("name", sorted(path.name for path in EXAMPLES.glob("*.py")))
def test_example_imports_only_the_public_api(name):
    assert not internal_imports((EXAMPLES / name).read_text()), f"{name} imports internals"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_runs_at_a_tiny_budget(name):
    if name in NEEDS:
        try:
            data_file(NEEDS[name])
        except FileNotFoundError as missing:
            pytest.skip(f"{name} needs {NEEDS[name]}: {missing}")
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *RUNS[name]], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert EXPECT[name] in run.stdout, run.stdout[-2000:]
