"""Semivalue weights: Shapley, Banzhaf, Beta(alpha, beta) and leave-one-out.

A semivalue of a game v on n players is phi_i = sum_{S subset of N minus i} w(|S|) [v(S u i) - v(S)] (Dubey, Neyman &
Weber 1981). For every semivalue here the weights make a probability distribution over the coalitions S that i
joins, sum_s binom(n-1, s) w(s) = 1, so phi_i is the expected marginal contribution of i to a random S:

* Shapley: w(s) = 1 / (n binom(n-1, s)), the average over permutations (Shapley 1953).
* Banzhaf: w(s) = 1 / 2^(n-1), every S equally likely (Banzhaf 1965).
* Beta(alpha, beta): w(s) = B(s + beta, n - 1 - s + alpha) / B(alpha, beta) (Kwon & Zou 2022, Beta Shapley, Eq. 3
  with their normalisation w_n^(j) / n, j = s + 1); Beta(1, 1) is Shapley, Beta(16, 1) favours small coalitions.
* Leave-one-out: w(n-1) = 1, only the grand coalition without i.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np
from scipy.special import betaln, gammaln

from bayesval.games.masks import coalition_masks
from bayesval.validation import check_positive

SEMIVALUES = ("shapley", "banzhaf", "beta", "loo")
# The most players whose weights are products of exact binomials, as they always were: from 1,021 players on,
# n binom(n - 1, s) is past a double (and from 1,031 binom(n - 1, s) itself), so beyond it they are taken in log space.
LARGEST_EXACT_N = 1020


@dataclass(frozen=True)
class Semivalue:
    """A semivalue by kind ('shapley', 'banzhaf', 'beta' with alpha and beta, or 'loo' for leave-one-out)."""

    kind: str
    alpha: float = 1.0
    beta: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in SEMIVALUES:
            raise ValueError(f"semivalue must be one of {SEMIVALUES} (or a Semivalue), got {self.kind!r}")
        object.__setattr__(self, "alpha", check_positive("alpha (of the Beta semivalue)", self.alpha))
        object.__setattr__(self, "beta", check_positive("beta (of the Beta semivalue)", self.beta))
        if self.kind != "beta" and (self.alpha, self.beta) != (1.0, 1.0):
            raise ValueError(f"alpha and beta belong to the 'beta' semivalue, not {self.kind!r}")

    @property
    def name(self) -> str:
        """'shapley', 'banzhaf', 'loo' or 'beta(alpha, beta)': what a result records and resume checks."""
        return f"beta({self.alpha:g}, {self.beta:g})" if self.kind == "beta" else self.kind

    def weights(self, num_players: int) -> np.ndarray:
        """w(s) for s = 0, ..., n - 1: the weight of a marginal contribution to a coalition of size s."""
        n, sizes = num_players, np.arange(num_players)
        if n > LARGEST_EXACT_N:
            return np.exp(self._log_size_weights(n) - _log_binomials(n - 1))
        if self.kind == "shapley":
            return np.array([1.0 / (n * comb(n - 1, int(s))) for s in sizes])
        if self.kind == "banzhaf":
            return np.full(n, 0.5 ** (n - 1))
        if self.kind == "loo":
            return (sizes == n - 1).astype(np.float64)
        return np.exp(betaln(sizes + self.beta, n - 1 - sizes + self.alpha) - betaln(self.alpha, self.beta))

    def size_weights(self, num_players: int) -> np.ndarray:
        """binom(n-1, s) w(s): the probability that i joins a coalition of size s (they sum to 1)."""
        if num_players > LARGEST_EXACT_N:
            return np.exp(self._log_size_weights(num_players))
        return np.array([comb(num_players - 1, s) for s in range(num_players)], np.float64) * self.weights(num_players)

    def _log_size_weights(self, n: int) -> np.ndarray:
        """log(binom(n-1, s) w(s)) for s = 0, ..., n - 1, where binom(n-1, s) is past a double (n > LARGEST_EXACT_N)."""
        sizes = np.arange(n)
        if self.kind == "shapley":
            return np.full(n, -np.log(n))
        if self.kind == "banzhaf":
            return _log_binomials(n - 1) - (n - 1) * np.log(2.0)
        if self.kind == "loo":
            return np.where(sizes == n - 1, 0.0, -np.inf)
        beta = betaln(sizes + self.beta, n - 1 - sizes + self.alpha) - betaln(self.alpha, self.beta)
        return _log_binomials(n - 1) + beta


def _log_binomials(m: int) -> np.ndarray:
    """log binom(m, s) for s = 0, ..., m."""
    sizes = np.arange(m + 1)
    return gammaln(m + 1) - gammaln(sizes + 1) - gammaln(m - sizes + 1)


SHAPLEY = Semivalue("shapley")
"""The Shapley value: w(s) = 1 / (n C(n-1, s)) (Shapley 1953)."""
BANZHAF = Semivalue("banzhaf")
"""The Banzhaf value: w(s) = 2^(1-n) (Banzhaf 1965; Wang & Jia 2023, Data Banzhaf)."""
LEAVE_ONE_OUT = Semivalue("loo")
"""Leave-one-out: all weight on the coalition of everyone else, v(N) - v(N \\ {i})."""


def beta_shapley(alpha: float, beta: float) -> Semivalue:
    """The Beta(alpha, beta) semivalue of Kwon & Zou (2022)."""
    return Semivalue("beta", alpha, beta)


def as_semivalue(semivalue: str | Semivalue) -> Semivalue:
    """A Semivalue from itself or its kind's name ('shapley', 'banzhaf', 'loo'; 'beta' needs beta_shapley(a, b))."""
    if isinstance(semivalue, Semivalue):
        return semivalue
    if semivalue == "beta":
        raise ValueError("semivalue='beta' needs its parameters: pass beta_shapley(alpha, beta)")
    if not isinstance(semivalue, str):
        raise TypeError(f"semivalue must be a name {SEMIVALUES} or a Semivalue, got {semivalue!r}")
    return Semivalue(semivalue)


def coalition_coefficients(masks: np.ndarray, semivalue: Semivalue) -> np.ndarray:
    """C (B, n) with phi_i = sum over all coalitions of C[c, i] v(c): w(|c| - 1) where i is in c, else -w(|c|)."""
    masks = np.asarray(masks, bool)
    num_players = masks.shape[1]
    weights = np.append(semivalue.weights(num_players), 0.0)  # w(n) = 0: nobody joins the grand coalition
    sizes = masks.sum(axis=1, keepdims=True)
    return np.where(masks, weights[np.maximum(sizes - 1, 0)], -weights[sizes])


def semivalue_matrix(num_players: int, semivalue: Semivalue) -> np.ndarray:
    """A (n, 2^n) with phi = A v for v over all 2^n coalitions in code order."""
    return coalition_coefficients(coalition_masks(num_players, include_empty=True), semivalue).T
