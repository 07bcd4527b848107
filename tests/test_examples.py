"""Every example script imports only the public API and runs at a tiny budget through its NumPyro-style flags."""

import subprocess
import sys
from pathlib import Path

import pytest
from public_api import internal_imports

from bayesval.datasets.paths import data_file

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TINY = ["--num-chains", "2", "--num-warmup", "20", "--num-samples", "40", "--num-repeats", "2"]
# 20 warm-up steps: stuck; 60 got stuck on one Table 1 coalition once the tighter sensitivity halved the DP noise
NUTS_TINY = ["--num-chains", "2", "--num-warmup", "100", "--num-samples", "120", "--num-repeats", "2"]
RUNS = {
    "syn_privacy_tradeoff.py": TINY,
    "many_parties.py": ["--num-chains", "2", "--num-warmup", "4", "--num-samples", "8", "--num-repeats", "2"]
    + ["--tolerance", "0.5", "--max-permutations", "8"]  # one batch, 3 Latin blocks of 12 permutations: ~700 rows
    + ["--no-control-variate"],  # the surrogate's 4,095 fits would take longer than the run
    "diab_privacy_tradeoff.py": [*NUTS_TINY, "--epsilon-2", "12.5", "--percentiles", "50", "100"],
    "syn_rewards.py": [*TINY, "--epsilons", "0.1", "12.5", "--reward-repeats", "1"],
    "rewards_reached.py": TINY,
    "calih_thinning.py": [*TINY, "--thinnings", "1,2"],
}
NEEDS = {"diab_privacy_tradeoff.py": "pima_indians_diabetes.csv", "calih_thinning.py": "california_housing.csv.gz"}
EXPECT = {"syn_privacy_tradeoff.py": "[0,100]", "many_parties.py": "party 3", "diab_privacy_tradeoff.py": "MNLP_N"}
EXPECT |= {"syn_rewards.py": "Fig. 3a", "rewards_reached.py": "every reward reached", "calih_thinning.py": "thin t"}


def test_every_example_is_run():
    assert sorted(RUNS) == sorted(path.name for path in EXAMPLES.glob("*.py"))


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
