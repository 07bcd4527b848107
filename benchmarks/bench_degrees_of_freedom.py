"""How many degrees of freedom a sampled index's variance claims, against how many it holds (2026-12-05).

    python benchmarks/bench_degrees_of_freedom.py [--indices 20000]

An index of n groups as stratified sampling files them (one per coalition size; sizes 0 and n - 1 one coalition each,
of a utility that gives it one value: exact), m normal draws in each sampled group, true value 0. Per (n, m): the
median of the degrees of freedom `SemivalueState.estimate` reports, those the draws hold (sum of m - 1 over the
sampled groups), the variance's own degrees of freedom over the indices (2 E[V]^2 / Var V), E[V] over the true
variance, the share of |z| beyond Student's t quantile at 97.5 % with the reported degrees of freedom (5 % where
they are right), and the share of indices trusted (`TRUSTED_DOF`). The groups' statistics are written directly (no
sampler runs), so 20,000 indices take seconds.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
from scipy import stats

from bayesval.results.variance import TRUSTED_DOF, index_dof, variances_and_dof


def index_of(rng, num_players: int, draws: int):
    """One index's estimate, variance and reported degrees of freedom (true value 0)."""
    exact = np.zeros(num_players, bool)
    exact[[0, -1]] = True
    x = np.where(exact[:, None], 0.3, rng.normal(size=(num_players, draws)))  # (G, m): the ends one value each
    deviations = x - x.mean(axis=1, keepdims=True)
    column = lambda a: a[:, None]  # noqa: E731  (G,) -> (G, 1 index)
    state = SimpleNamespace(
        coefficients=np.full(num_players, 1 / num_players),
        exact=exact,
        layers=np.ones(num_players, bool),
        counts=np.full((num_players, 1), draws),
        m2=column((deviations**2).sum(axis=1)),
        m4=column((deviations**4).sum(axis=1)),
        low=column(x.min(axis=1)),
        high=column(x.max(axis=1)),
        value_low=-1.0,
        value_high=1.0,
        control_table=None,
        keyed=False,
    )
    variances, dofs, borrowed = variances_and_dof(state)
    terms = state.coefficients[:, None] ** 2 * variances / draws
    estimate = (state.coefficients * x.mean(axis=1)).sum() - state.coefficients[exact].sum() * 0.3
    return estimate, terms.sum(), index_dof(terms, dofs, borrowed)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--indices", type=int, default=20_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for num_players, draws in ((8, 2), (14, 2), (14, 4), (14, 8)):
        estimate, variance, dof = np.array([index_of(rng, num_players, draws) for _ in range(args.indices)]).T
        truth = (num_players - 2) / num_players**2 / draws
        held = (num_players - 2) * (draws - 1)
        outside = np.mean(np.abs(estimate / np.sqrt(variance)) > stats.t.ppf(0.975, dof))
        print(
            f"n = {num_players}, m = {draws}: reported dof median {np.median(dof):.1f}, held {held}, the variance's "
            f"own {2 * variance.mean() ** 2 / variance.var():.1f}; E[V] / true {variance.mean() / truth:.2f}; "
            f"|z| beyond t(0.975) {outside:.3f}; trusted {np.mean(dof >= TRUSTED_DOF):.2f}"
        )


if __name__ == "__main__":
    main()
