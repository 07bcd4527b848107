"""The utility's own error where each coalition's estimates are cached: what it adds to a sampled semivalue.

A utility that returns R estimates of each coalition's value (the party surprise: one per repeat, from fresh chains)
and returns the same ones whenever the coalition comes again (it caches them) values a fixed noisy game vbar =
v + e, with e_C the error of the mean of C's estimates, independent between coalitions, of variance sigma_C^2 / R.
The error of a sampled semivalue then splits in two independent parts,

    phi^_i - phi_i(v) = (phi^_i - phi_i(vbar)) + (phi_i(vbar) - phi_i(v)),

the first the sampling error of a deterministic game, vbar, which the spread of the draws estimates as for any game
(`bayesval.results.variance`: the draws are of vbar, so their spread holds e's share too), the second the utility's
error in the exact semivalue,

    Var(phi_i(vbar) - phi_i(v)) = sum over all coalitions C of w_Ci^2 sigma_C^2 / R,

with w_Ci the semivalue's coefficient of v(C) in phi_i: w(|C| - 1) where i is in C, else -w(|C|) (Weber 1988). w_Ci
depends on C through its size and whether it holds i alone, so the sum runs over 2n + 2 classes (size s, i in C or
not), each class's sigma_C^2 estimated by the mean sample variance s_C^2 of the coalitions of that class that the run
valued. The classes with most weight hold a single coalition ({i}, N minus i, N and the empty one), each known from its
R estimates alone: 1 degree of freedom at R = 2, so few that a standard error resting on them is never trusted. So a
class of which fewer than two coalitions were valued takes the mean of its size's valued coalitions ({i} that of
every {j}, N minus i that of every N minus j), and a size of one coalition (the empty one, N) is pooled with the next
size (1, n - 1) unless its estimates agree exactly (a value without error, as v(empty) = 0 usually is); the next
size stands for it where it was not valued (uniform coalitions seldom hold it). That is a
model: a coalition's error variance depends on its size, not its members, where too few coalitions tell them apart.
The k-NN estimator of the surprise's entropy term is equivariant to the posterior's scale, so its error changes
little with how concentrated a coalition's posterior is; tests/test_utility_error.py measures calibration where three
times the error on every coalition that holds one player breaks the model.

The estimate is a weighted sum of the valued coalitions' sample variances, sum_C c_Ci s_C^2 / R, each of R - 1 degrees
of freedom and independent of the others; a coalition that several classes average (a size's coalitions, where a
class of one coalition takes their mean) enters once, with the sum of its weights. Its degrees of freedom are
Satterthwaite's (1946) for that sum, nu_i = (R - 1) (sum_C t_Ci)^2 / sum_C t_Ci^2, with t_Ci = c_Ci sigma_C^2 / R and
sigma_C^2 estimated by the class means C enters. Where the classes' coalitions are disjoint this is Satterthwaite's
count over the classes, each mean of m coalitions worth m (R - 1) degrees of freedom; counting the classes as
independent where they share a size's coalitions ({i} and N minus i take the means of sizes 1 and n - 1 that other
classes hold too) overstated nu about 1.6-fold (docs/games.md, "The utility's own error").

The spread of the R semivalues computed from each estimate alone (`SemivalueState.estimate` without this record)
estimates sum_C a_Ci^2 sigma_C^2 / R instead, with a_Ci the run's own coefficient of v(C): it counts e's share of
the draws' spread twice (E a_Ci^2 = w_Ci^2 + Var a_Ci, and the draws' spread holds the Var a_Ci part), and has only
R - 1 degrees of freedom; right, if wide, also where coalitions' errors correlate (common random numbers). Measured
in docs/games.md, "The utility's own error".
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

# Two sets of estimates of one coalition are the same where they agree to this share of the largest |estimate| of the
# records (or of 1, if larger): with a control variate the estimates are v - u, and u is computed again each time its
# coalition comes (a Laplace fit, a sum over members), in a batch of another shape, which can round otherwise in the
# last bits; a utility that values a coalition afresh differs by its Monte Carlo error, many orders of magnitude more.
SAME_ESTIMATES = 1e-9


@dataclass
class CoalitionNoise:
    """The cached estimates of every coalition a run valued, and the semivalue's weights.

    weights    (n,) w(s), the semivalue's weight of a marginal contribution to a coalition of size s
    masks      (E, ceil(n / 8)) uint8, each valued coalition's members as packed bits (`numpy.packbits`)
    estimates  (E, R) its R estimates (of v - u with a control variate: the same spread)
    """

    weights: np.ndarray
    masks: np.ndarray
    estimates: np.ndarray

    ARRAYS = ("weights", "masks", "estimates")

    @classmethod
    def empty(cls, weights: np.ndarray, num_repeats: int) -> CoalitionNoise:
        """Before the first batch, for a semivalue of weights w(s) (n,) and a utility of R estimates a coalition."""
        num_players = len(weights)
        no_masks = np.zeros((0, -(-num_players // 8)), np.uint8)
        return cls(np.asarray(weights, np.float64), no_masks, np.zeros((0, num_repeats)))

    @property
    def num_players(self) -> int:
        return len(self.weights)

    @property
    def num_coalitions(self) -> int:
        return len(self.estimates)

    def added(self, masks: np.ndarray, values: np.ndarray, names: list[str] | None = None) -> CoalitionNoise:
        """With one batch's masks (M, n) boolean and their values (R, M) filed; a ValueError, naming the coalition by
        its players' `names`, where a coalition valued before got other estimates (the utility does not cache)."""
        batch = CoalitionNoise(self.weights, np.packbits(np.asarray(masks, bool), axis=1), np.asarray(values).T)
        joined, differing = self._joined(batch)
        if differing is not None:
            raise ValueError(
                f"the utility gave {self._members(differing, names)} two different sets of estimates: "
                "independent_estimates=True is for a utility that caches each coalition's estimates (one that values "
                "a coalition afresh each time has its whole error in the draws' spread: leave it False)"
            )
        return joined

    def merged(self, other: CoalitionNoise, names: list[str] | None = None) -> CoalitionNoise:
        """Both records' coalitions, each once; a ValueError, naming the coalition by its players' `names`, where a
        coalition has different estimates in the two (two runs that estimated their coalitions apart value two
        different noisy games, which do not merge)."""
        joined, differing = self._joined(other)
        if differing is not None:
            raise ValueError(
                f"cannot merge the results: {self._members(differing, names)} has different estimates "
                "in the two, so each run valued its coalitions apart (each a noisy game of its own, whose errors the "
                "merged standard errors would not hold); to sample more, continue the first run with "
                "resume_from=<that result> instead, which reuses its coalitions' estimates"
            )
        return joined

    def _joined(self, other: CoalitionNoise) -> tuple[CoalitionNoise, np.ndarray | None]:
        """Both records' coalitions, each once (the first estimates of each), and the packed mask of a coalition whose
        estimates differ by more than rounding (SAME_ESTIMATES), or None."""
        masks = np.concatenate([self.masks, other.masks])
        estimates = np.concatenate([self.estimates, other.estimates])
        rows = np.ascontiguousarray(masks).view(f"V{masks.shape[1]}").ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        largest = np.max(np.abs(estimates), where=np.isfinite(estimates), initial=1.0)
        differ = ~(np.abs(estimates - estimates[first[inverse]]) <= SAME_ESTIMATES * largest).all(axis=1)
        kept = np.sort(first)
        return CoalitionNoise(self.weights, masks[kept], estimates[kept]), masks[differ][0] if differ.any() else None

    def _members(self, packed: np.ndarray, names: list[str] | None) -> str:
        """A packed coalition mask in words: its players, by name where `names` are given (else by index)."""
        players = np.flatnonzero(np.unpackbits(packed, count=self.num_players)).tolist()
        if not players:
            return "the empty coalition"
        return f"the coalition {players if names is None else [names[player] for player in players]}"

    def variance(self) -> tuple[np.ndarray, np.ndarray]:
        """Var(phi(vbar) - phi(v)) (n,) estimated over the 2n + 2 classes of coalitions, and its Satterthwaite
        degrees of freedom (n,), inf where it is 0 (module docstring)."""
        n, repeats = self.num_players, self.estimates.shape[1]
        if self.num_coalitions == 0 or repeats < 2:
            return np.zeros(n), np.full(n, np.inf)
        member = np.unpackbits(self.masks, axis=1, count=n).astype(bool)  # (E, n)
        sizes = member.sum(axis=1)
        own = self.estimates.var(axis=1, ddof=1) / repeats  # s_C^2 / R
        pools = _size_pools(sizes, own, n)  # (n + 1, E)
        variance, shares = np.zeros(n), np.zeros(member.shape)  # shares: each coalition's part of the variance
        for inside in (True, False):
            for size, weight in enumerate(self._class_weights(inside)):
                if weight == 0:
                    continue
                in_class = (member == inside) & (sizes == size)[:, None]  # (E, n)
                stand_in = pools[size] if pools[size].any() else np.ones(len(own), bool)
                group = np.where(in_class.sum(axis=0) >= 2, in_class, stand_in[:, None])  # the coalitions averaged
                counts = group.sum(axis=0)
                term = weight * (own @ group) / counts  # (n,) the class's weight times its mean s_C^2 / R
                variance += term
                shares += group * (term / counts)
        with np.errstate(invalid="ignore", divide="ignore"):
            dof = (repeats - 1) * variance**2 / (shares**2).sum(axis=0)
        return variance, np.where(variance > 0, dof, np.inf)

    def _class_weights(self, inside: bool) -> np.ndarray:
        """(n + 1,) sum of w_Ci^2 over the coalitions C of each size s that hold i (inside) or do not."""
        n, padded = self.num_players, np.append(self.weights, 0.0)  # w(n) = 0: nobody joins N
        if inside:  # C = S u i, |S| = s - 1
            return np.array([0.0] + [comb(n - 1, s - 1) * padded[s - 1] ** 2 for s in range(1, n + 1)])
        return np.array([comb(n - 1, s) * padded[s] ** 2 for s in range(n)] + [0.0])

    def copy(self) -> CoalitionNoise:
        return CoalitionNoise(*(np.array(getattr(self, name)) for name in self.ARRAYS))


def _size_pools(sizes: np.ndarray, own: np.ndarray, num_players: int) -> np.ndarray:
    """(n + 1, E): the valued coalitions whose mean s_C^2 / R stands for each size 0..n, its own coalitions, the two
    sizes of a single coalition (the empty one and N) pooled with the next size (1, n - 1) unless its estimates agree
    exactly (a value without error, as v(empty) = 0 usually is), the next size standing for it where it was not
    valued."""
    pools = sizes[None, :] == np.arange(num_players + 1)[:, None]
    for single, next_size in ((0, 1), (num_players, num_players - 1)):
        if next_size != single and (not pools[single].any() or own[pools[single]].sum() > 0):
            pools[single] |= pools[next_size]
    return pools
