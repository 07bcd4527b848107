"""Today's values and standard errors, pinned bit for bit before the package redesign (modules moved, no behaviour
change intended): with the same keys and the same releases, five valuations must give IDENTICAL numbers, and result
files saved today must still load to the same numbers.

The expected arrays, releases and result files in `tests/data/pinned/` were written by `tests/make_pinned.py` at the
commit before the redesign; do not regenerate them to make this test pass. A later change of behaviour made on
purpose re-pins only its valuation (`make_pinned.py --only NAME`), listed in make_pinned.py's docstring. The
valuations are in `tests/pinned_valuations.py`, through the public API only. Each was checked bit-reproducible at
that commit, twice in one process and across processes. Bit identity is promised for the same environment only:
another jaxlib (XLA) or numpy version, or another CPU, may round differently (XLA compiles for the host's vector
instructions), so where `environment()` is not the pinned one (tests/data/pinned/environment.json, which predates
recording the CPU) the arrays must agree to `ROUNDING` of their size instead, and a failure says what differs.
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


# Measured on an AMD EPYC (2026-11-29) against the arrays pinned on another x86-64 CPU, same library versions: the
# party, k-NN and rewards arrays agreed to 1e-13 of their size and the gradient trajectories (whose SGD steps carry a
# last-bit difference forward) to 8e-7. A change of behaviour moves an estimate by its Monte Carlo error, a few
# percent of its size: ten thousand times this bound and more.
ROUNDING = 1e-5


def assert_reproduced(computed: dict[str, np.ndarray], pinned: dict[str, np.ndarray]) -> None:
    """The same arrays under the same names and dtypes: bit for bit in the pinned environment; elsewhere, integers and
    booleans equal and floats within `ROUNDING` of the largest pinned magnitude of their array."""
    assert sorted(computed) == sorted(pinned)
    note = environment_note()
    for name, array in pinned.items():
        if note and array.dtype.kind in "fc" and array.size:
            assert computed[name].dtype == array.dtype, name
            scale = ROUNDING * np.max(np.abs(array))
            np.testing.assert_allclose(computed[name], array, rtol=0, atol=scale, err_msg=name + note)
        else:
            np.testing.assert_array_equal(computed[name], array, err_msg=name + note, strict=True)


@pytest.mark.parametrize("name", list(VALUATIONS))
def test_valuation_reproduces_the_pinned_one(name):
    assert_reproduced(VALUATIONS[name](), expected(name))


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
    ("file", "valuation", "prefix"), [("layered", "layered_at_save", "layered"), ("dp_tknn", "knn_at_save", "dp_tknn")]
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
