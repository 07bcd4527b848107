"""Write the pinned releases, expected arrays and result files of `tests/test_behaviour_pinned.py`.

It was run once, at the commit before the package redesign (modules moved, no behaviour change intended), and its
output is committed under `tests/data/pinned/`. Do NOT re-run it to make `test_behaviour_pinned.py` pass after a
refactor: the files are what today's code computes, and a refactor that changes them changed behaviour. Deleting the
release files before a run would also draw new releases and change every pinned number.

    PYTHONPATH=. python tests/make_pinned.py          # from the repository root
    PYTHONPATH=. python tests/make_pinned.py --only rewards   # re-pin one valuation's arrays

Re-pinned since, each for a change of behaviour made on purpose and said in its commit (the releases, the other
valuations and the saved result files are still those of the redesign's commit):
- `rewards.npz`, issue 30: the reward metrics compare with the draws the valuation sampled for the grand coalition
  and each party alone, instead of a second sampler call of the same posteriors (which also shifted the searches'
  sampler keys by one call). `rewards_at_save.npz` keeps the arrays `rewards_result.npz` was saved with.
- `rewards.npz` again, issue 30: tempering's first round is one shared log grid of kappa, and later rounds put
  falsi's neighbours at +-2 tolerance instead of even splits of the bracket (other trials, so other rewards). The
  noise-addition arrays did not change.
- `party.npz` and `rewards.npz`, issue 30: the Gibbs sampler's and the k-NN summary's programs compile without XLA's
  CPU fusion emitters (`bayesval.compilation.FUSION_EMITTERS_OFF`), which rounds differently: every array moved by
  at most 1.8e-9 relative (the values and standard errors by at most 6e-12), and no search took another trial.
- `party.npz` and `rewards.npz`, issue 30 (2026-11-27): the Gibbs sweep program maps one sweep over every
  (coalition, chain) row with the loops outside the map, where it mapped over chains inside a map over coalitions
  with the loops inside (the same operations, which XLA vectorises and rounds differently): every array moved by
  at most 9.8e-10 relative (a draw; every value, standard error and reward parameter by at most 1.4e-12), and no
  search took another trial.
- `layered.npz`: Layered Shapley values layer 0, v({i}) - v({}), by default (`include_empty_layer=True`), so that
  its values estimate the Shapley value its (alpha, beta) guarantee is stated for: every Layered and DP Layered
  value moved by its layer-0 term (v({i}) - v({})) / n, at most 3.2e-3; each point's count rose by 1 and the
  standard errors, the noise and the other draws are unchanged. `layered_at_save.npz` keeps the arrays
  `layered_result.npz` was saved with.
- `layered.npz` again (2026-12-06): DP Layered Shapley's noise is floating-point safe, each value rounded to a
  power-of-two grid and the rounded Laplace noise drawn exactly from a seeded `random.Random`
  (`Mechanism.laplace_on_grid`), where it was float Laplace noise from a JAX key: the DP values moved by their new
  noise (at most 1.87) and their standard errors by the grid's rounding (at most 4.0e-4); the Layered values,
  standard errors and draw counts are unchanged.
- `gradient.npz` (2026-12-06): the DP-gradient semivalues' releases are floating-point safe, each example's clipped
  gradient rounded to a power-of-two grid and round(X), X Gaussian, drawn exactly from a seeded `random.Random`
  (`Mechanism.gaussian_on_grid`), where it was float Gaussian noise from a JAX key: the DP values moved by their
  new noise (at most 0.23) and their standard errors with it (at most 0.052); the no-DP arrays are unchanged.
- `knn.npz` (2026-12-06): DP-TKNN-Shapley's counts and the naive DP-KNN baseline's values get the Gaussian rounded
  to a grid, drawn exactly from a seeded `random.Random` (`Mechanism.gaussian_on_grid`), where they got float
  Gaussian noise from a JAX key: the DP-TKNN values moved by their new noise and subsamples (at most 1.57) and the
  DP-KNN values by their new noise (at most 17.1 over 80 values, where two independent draws differ by a std of
  7.0: noise std 0.79 per validation point, summed over 40); only the `dp_` arrays were re-pinned (a full re-run
  moved the TKNN values by 1.1e-16, kept as they were). `knn_at_save.npz` keeps the arrays `dp_tknn_result.npz`
  was saved with.

What it writes:
- `party_1.release.json` ... `party_3.release.json`: the releases of the three parties of `bayesval demo` (Sim et
  al. 2023, Sec. 6, the Syn setting at seed 0), released as the demo releases them (discrete Gaussian noise from OS
  entropy) and saved by `PerturbedStatistic.save`; only where they are missing, so that a re-run at this commit
  values the same releases.
- `party.npz`, `knn.npz`, `layered.npz`, `gradient.npz`, `rewards.npz`: the arrays of `tests/pinned_valuations.py`
  (np.savez: float64 at full precision).
- `environment.json`: the library versions and machine the arrays were computed on.
- `rewards_result.npz`, `layered_result.npz` and `dp_tknn_result.npz`: `ValuationResult.save()` of the party
  valuation with the demo's rewards, of Layered Shapley and of DP-TKNN-Shapley (a result with a privacy ledger), to
  check that files saved today still load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import pinned_valuations as pinned  # noqa: E402

import bayesval as bv  # noqa: E402


def release_demo_parties() -> None:
    """Release the demo's parties once and save the releases (as `bayesval demo` builds them, seed 0)."""
    from bayesval.datasets.synthetic import make_syn  # the demo's data generator (run here, at this commit, only)

    syn = make_syn(seed=0)
    epsilons = (0.2, 0.1, 0.2)
    model = bv.models.LinearRegression()
    for (X, y), epsilon, name, path in zip(syn.parties, epsilons, pinned.PARTY_NAMES, pinned.RELEASE_FILES):
        party = bv.Party(X, y, epsilon=epsilon, rdp_order=2.0, bounds=syn.bounds, name=name)
        party.release(model.statistic(party.num_features)).save(path)


def main() -> None:
    if sys.argv[1:2] == ["--only"]:  # re-pin named valuations after a deliberate change of behaviour (see above)
        for name in sys.argv[2:]:
            np.savez(pinned.PINNED / f"{name}.npz", **pinned.VALUATIONS[name]())
        return
    pinned.PINNED.mkdir(parents=True, exist_ok=True)
    if not all(path.exists() for path in pinned.RELEASE_FILES):
        release_demo_parties()
    (pinned.PINNED / "environment.json").write_text(json.dumps(pinned.environment(), indent=1) + "\n")
    for name, valuation in pinned.VALUATIONS.items():
        np.savez(pinned.PINNED / f"{name}.npz", **valuation())
    pinned.party_result(*pinned.reward_settings()["demo"]).save(pinned.PINNED / "rewards_result.npz")
    pinned.layered_results()["layered"].save(pinned.PINNED / "layered_result.npz")
    pinned.knn_results()["dp_tknn"].save(pinned.PINNED / "dp_tknn_result.npz")
    for path in sorted(pinned.PINNED.iterdir()):
        print(f"{path.name}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
