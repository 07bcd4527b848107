"""A coalition game replayed from known values: the party route's Shapley policy without a posterior sampled.

`ReplayedGame` keeps the interface of the coalition surprise (`bayesval.parties.valuation.CoalitionGame`): each
coalition asked for gets R estimates, its known value plus its own Monte Carlo noise, drawn once and cached as the
surprise caches its repeats, so `shapley_values` values it by the same policy (exact up to `exact_up_to`, Latin
permutations, the control variate, the stopping rule) as it values the parties. Where the values are a table of every
coalition, the exact Shapley values are known, so the policy's standard errors can be checked against the truth
(tests/test_shapley_policy.py, benchmarks/bench_shapley_policy.py; docs/benchmarks.md, "The Shapley policy on a
replayed game").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from bayesval.games.control import surrogate_values
from bayesval.games.fingerprint import probe_masks
from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.parties.valuation import Surrogates
from bayesval.validation import check_int

CoalitionValues = Callable[[np.ndarray], np.ndarray]  # masks (B, n) -> values (B,)


@dataclass(eq=False)
class ReplayedGame:
    """v_C of each coalition replayed with noise: R estimates v_C + noise_C z, z standard normal, drawn from
    (`seed`, C) alone, so a coalition's estimates do not depend on when it is asked for.

    num_parties  n
    truth        (2^n,) v of every coalition in code order (sum_i mask_i 2^i), or a function of masks (B, n) -> (B,)
    noise        the standard deviation of one estimate: a number, (2^n,) per coalition in code order, or a function
                 of masks; the empty coalition's estimates are 0 whatever it says
    num_repeats  R, the estimates of each coalition (the sampled surprise's repeats: 2 where coalitions are sampled)
    seed         the noise's seed
    surrogate    a surrogate of the game for the policy's control variate: (2^n,) in code order, a function of
                 masks, or None
    vectorised   whether the policy batches its permutations as for the chains' vectorised calls (True) or one
                 Latin block a batch as for importance sampling (`bayesval.parties.valuation.permutation_sampler`)
    """

    num_parties: int
    truth: np.ndarray | CoalitionValues
    noise: float | np.ndarray | CoalitionValues
    num_repeats: int = 2
    seed: int = 0
    surrogate: np.ndarray | CoalitionValues | None = None
    kl_estimator: str = "replayed"  # errors independent between coalitions (`independent_estimates`)
    vectorised: bool = True
    cache: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.num_parties = check_int("num_parties", self.num_parties, minimum=2, maximum=62)
        self.num_repeats = check_int("num_repeats", self.num_repeats, minimum=1)
        for name in ("truth", "noise", "surrogate"):
            given = getattr(self, name)
            if isinstance(given, np.ndarray) and given.shape != (2**self.num_parties,):
                raise ValueError(
                    f"{name} must hold one value per coalition of {self.num_parties} parties, shape "
                    f"({2**self.num_parties},) in code order, or be a function of masks; got shape {given.shape}"
                )
        self.cache = {0: np.zeros(self.num_repeats)}

    @property
    def values(self) -> dict[int, np.ndarray]:
        """Each coalition valued so far (its code) -> its (R,) estimates."""
        return self.cache

    @property
    def num_sampled(self) -> int:
        """Non-empty coalitions valued so far."""
        return len(self.cache) - 1

    @property
    def fingerprint(self) -> str:
        """A hash of the replayed values, their noise and the surrogate on a few coalitions (the first 8 parties
        alone, then the games layer's probes: everyone and three fixed random coalitions, `probe_masks`), the noise's
        seed and the repeats."""
        probes = np.vstack(
            [np.eye(self.num_parties, dtype=bool)[: min(self.num_parties, 8)], probe_masks(self.num_parties)]
        )
        digest = hashlib.sha256()
        for given in (self.truth, self.noise) + (() if self.surrogate is None else (self.surrogate,)):
            values = np.ascontiguousarray(_of(given, probes), np.float64)  # a number, or one value a probe or more
            digest.update(repr(values.shape).encode() + values.tobytes())
        digest.update(f"{self.seed}/{self.num_repeats}".encode())
        return "replayed " + digest.hexdigest()[:16]

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        """(R, B) estimates of the coalitions `masks` (B, n), each drawn once and cached."""
        masks = np.asarray(masks, bool)
        codes = mask_codes(masks).tolist()
        new = {int(code): row for row, code in enumerate(codes) if int(code) not in self.cache}
        if new:
            self._draw(list(new), masks[list(new.values())], 0, len(self.cache[0]))
        return np.stack([self.cache[int(code)] for code in codes], axis=1)

    def add_repeats(self, count: int) -> None:
        """`count` more estimates of every coalition valued so far, and as many for those valued later: the repeats
        an enumerated game adds to meet a tolerance (`bayesval.parties.valuation.repeats_to_tolerance`)."""
        codes = sorted(set(self.cache) - {0})
        first = len(self.cache[0])
        self.cache[0] = np.zeros(first + count)
        masks = ((np.array(codes, np.int64).reshape(-1, 1) >> np.arange(self.num_parties)) & 1).astype(bool)
        self._draw(codes, masks, first, count)

    def _draw(self, codes: list[int], masks: np.ndarray, first: int, count: int) -> None:
        """Estimates first, ..., first + count - 1 of the coalitions `codes` (masks `masks`), after their others:
        the value plus its noise, drawn from the coalition's stream (`seed`, code) past the estimates before them."""
        means, sds = _of(self.truth, masks), np.broadcast_to(_of(self.noise, masks), (len(masks),))
        for code, mean, sd in zip(codes, means, sds):
            draws = np.random.default_rng((self.seed, code)).standard_normal(first + count)[first:]
            self.cache[code] = np.concatenate([self.cache.get(code, np.zeros(0)), mean + sd * draws])

    def sampler_calls(self, sizes) -> int:
        """No sampler runs: 0 calls."""
        return 0

    def surrogates(self) -> Surrogates:
        """The policy's surrogates of this game (`shapley_values(..., surrogates=...)`): its table (a function's
        values on every coalition, which the policy asks for up to 12 parties only; 0 where it is not finite), and the
        surrogate of given coalitions (a function as it is given, with its flags or levels); none without one."""
        if self.surrogate is None:
            return Surrogates("the replayed game")
        surrogate, n = self.surrogate, self.num_parties
        return Surrogates(
            "the replayed game",
            lambda: _Table(surrogate_values(partial(_of, surrogate), coalition_masks(n, include_empty=True))),
            lambda: surrogate if callable(surrogate) else partial(_of, surrogate),
        )


@dataclass(frozen=True)
class _Table:
    values: np.ndarray
    name: str = "the replayed surrogate"


def _of(given, masks: np.ndarray) -> np.ndarray:
    """A table's (2^n,) or a function's values of the masks (B, n), or a number as it is."""
    if callable(given):
        return np.asarray(given(masks), np.float64)
    if np.ndim(given) == 0:
        return np.asarray(given, np.float64)
    return np.asarray(given, np.float64)[mask_codes(masks)]
