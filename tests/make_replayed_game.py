"""Write `tests/data/replayed_party_game_12.npz`: a 12-party coalition game whose exact Shapley values are known, for
the calibration of the party route's Shapley policy (`tests/test_shapley_policy.py`,
`benchmarks/bench_shapley_policy.py`).

    PYTHONPATH=. python tests/make_replayed_game.py          # from the repository root, a few minutes on 2 cores

Syn parties of 100 points (`make_syn(seed=0)`), as `benchmarks/bench_control_calibration.py` uses them:

* values   (4096,) v_C of every coalition in code order: the closed-form KL of the NIG posterior of C's exact summed
           statistics from the NIG prior (the non-private limit of the surprise, Sim et al. 2023, Sec. 3);
* surrogate (4096,) u_C: the package's Laplace surprise (`bayesval.inference.laplace.surprise_table`) of the same
           parties' releases at epsilon = 1e7, which misses v by the CLT model of the statistics and the Gaussian fit;
* noise    (4096,) the Monte Carlo standard deviation of one estimate of each coalition: 0.02 nats for every
           non-empty coalition (the sampled surprise's error at the fast preset is about 0.018), 0 for the empty one.

The file is deterministic (no random draws: the releases' noise comes from fixed noise seeds).
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.games.masks import coalition_masks
from bayesval.inference.conjugate import nig_expected_log_density
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import surprise_table

NUM_PARTIES = 12
NOISE = 0.02
PATH = Path(__file__).parent / "data" / "replayed_party_game_12.npz"


def exact_values(parties: list[bv.Party]) -> np.ndarray:
    """v_C (2^n,) in code order: the closed-form surprise of the parties' exact statistics, v(empty) = 0."""
    model = bv.models.LinearRegression()
    statistics = np.stack([party.exact_statistic() for party in parties])
    counts = np.array([len(party.X) for party in parties], np.float64)
    prior = model.priors(2).model

    def surprise(statistic, count):
        posterior = model.exact_posterior(statistic, count, 2)
        return nig_expected_log_density(posterior, posterior) - nig_expected_log_density(posterior, prior)

    masks = np.asarray(coalition_masks(len(parties), include_empty=True), np.float64)
    values = np.asarray(jax.jit(jax.vmap(surprise))(masks @ statistics, masks @ counts))
    return np.where(masks.any(axis=1), values, 0.0)


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    syn = make_syn(seed=0, sizes=(100,) * NUM_PARTIES)
    parties = [
        bv.Party(X, y, epsilon=1e7, bounds=syn.bounds, name=f"p{i}", noise_seed=900 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    model = bv.models.LinearRegression()
    releases = [party.release(model.statistic(2)) for party in parties]
    priors = model.priors(2)
    surrogate = surprise_table(NoiseAwareData.from_releases(releases), priors.model, priors.data, model.statistic(2))
    values = exact_values(parties)
    noise = np.full(values.shape, NOISE)
    noise[0] = 0.0
    np.savez_compressed(PATH, values=values, surrogate=np.asarray(surrogate.values), noise=noise)
    print(
        f"wrote {PATH}: {len(surrogate.unconverged)} surrogate fits unconverged; u / v - 1 from "
        f"{np.min(surrogate.values[1:] / values[1:] - 1):.3f} to {np.max(surrogate.values[1:] / values[1:] - 1):.3f}"
    )


if __name__ == "__main__":
    main()
