"""Today's values and standard errors, pinned bit for bit before the package redesign (modules moved, no behaviour
change intended): with the same keys and the same releases, five valuations must give IDENTICAL numbers, and result
files saved today must still load to the same numbers.

The expected arrays, releases and result files in `tests/data/pinned/` were written by `tests/make_pinned.py` at the
commit before the redesign; do not regenerate them to make this test pass. A later change of behaviour made on
purpose re-pins only its valuation (`make_pinned.py --only NAME`), listed in make_pinned.py's docstring. The
valuations are in `tests/pinned_valuations.py`, through the public API only. Each was checked bit-reproducible at
that commit, twice in one process and across processes, so no tolerance is needed. Bit identity is promised for the
same environment: another jaxlib (XLA) or numpy version, or another CPU, may round differently, so a failure first
compares `environment()` with the pinned one (tests/data/pinned/environment.json); run the check before and after
the redesign in the same environment.
"""

from __future__ import annotations

import numpy as np
import pytest
from pinned_valuations import (
    PARTY_NAMES,
    PINNED,
    VALUATIONS,
    environment,
    expected,
    pinned_environment,
    reward_arrays,
)

import bayesval as bv


def environment_note() -> str:
    """'' where this environment is the pinned one, else what differs (a likely cause of rounding differences)."""
    pinned, here = pinned_environment(), environment()
    differ = {name: (pinned.get(name), here.get(name)) for name in pinned.keys() | here.keys()}
    differ = {name: versions for name, versions in sorted(differ.items()) if versions[0] != versions[1]}
    return "" if not differ else f" (environment differs from the pinned one, (pinned, here): {differ})"


def assert_identical(computed: dict[str, np.ndarray], pinned: dict[str, np.ndarray]) -> None:
    """The same arrays under the same names, equal bit for bit (and of the same dtype)."""
    assert sorted(computed) == sorted(pinned)
    for name, array in pinned.items():
        np.testing.assert_array_equal(computed[name], array, err_msg=name + environment_note(), strict=True)


@pytest.mark.parametrize("name", list(VALUATIONS))
def test_valuation_is_bit_identical_to_the_pinned_one(name):
    assert_identical(VALUATIONS[name](), expected(name))


def test_saved_party_result_with_rewards_still_loads_to_the_pinned_numbers():
    result = bv.ValuationResult.load(PINNED / "rewards_result.npz")
    pinned = expected("rewards_at_save")  # the rewards arrays when the file was saved (since re-pinned, issue 30)
    assert result.names == list(PARTY_NAMES)
    for name in ("values", "stderr", "coalition_masks", "coalition_values", "coalition_stderr"):
        np.testing.assert_array_equal(getattr(result, name), pinned[name], err_msg=name)
    assert result.rewards is not None and result.rewards.mechanism == "tempering"
    loaded = reward_arrays(result.rewards, "demo")
    for name, array in loaded.items():
        np.testing.assert_array_equal(array, pinned[name], err_msg=name)
    assert [release.owner for release in result.privacy.releases] == list(PARTY_NAMES)


@pytest.mark.parametrize(
    ("file", "valuation", "prefix"), [("layered", "layered", "layered"), ("dp_tknn", "knn", "dp_tknn")]
)
def test_saved_data_point_result_still_loads_to_the_pinned_numbers(file, valuation, prefix):
    result = bv.ValuationResult.load(PINNED / f"{file}_result.npz")
    pinned = expected(valuation)
    np.testing.assert_array_equal(result.values, pinned[f"{prefix}_values"])
    np.testing.assert_array_equal(result.stderr, pinned[f"{prefix}_stderr"])
    if f"{prefix}_counts" in pinned:
        np.testing.assert_array_equal(result.counts, pinned[f"{prefix}_counts"])
    assert result.names == [str(i) for i in range(len(result.values))]
    assert len(result.privacy.releases) == (prefix == "dp_tknn")
