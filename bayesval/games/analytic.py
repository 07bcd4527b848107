"""Coalition games whose semivalues have closed forms: ground truth for sampled semivalues at any size.

Every semivalue is an average over the size of the coalition a player joins (Dubey, Neyman & Weber 1981):

    phi_i = sum_s p(s) m_i(s),  p(s) = binom(n-1, s) w(s),  m_i(s) = E[v(S u i) - v(S) | S subset of N minus i, |S| = s]

where p is the semivalue's size distribution (`Semivalue.size_weights`) and the expectation is over the
binom(n-1, s) coalitions of size s without i, all equally likely. Each game below gives m_i(s) in closed form as its
`expected_marginals()`, an (n, n) matrix built from hypergeometric probabilities taken in log space (gammaln), so
`game.semivalue(weights)` = m p is exact in float64 for any semivalue and hundreds of players, where enumerating the
2^n coalitions (`exact_semivalue`) stops at about 30.

Each game is a frozen dataclass with `num_players`, `values_of(masks) -> values` (masks (B, n) boolean, values (B,)
float64), its `utility` for `bayesval.games.semivalue` (a `KeylessUtility`: the values come from the masks alone), and
`semivalue(weights)`. The
utilities are NumPy: a few vector operations a batch, where a jitted utility compiled a program for every game and
batch shape (about 50 ms each; 53 of them in the analytic-game and calibration tests).
The games are those of the analytic test games of pyDVL (airport, shoes, miner, symmetric voting, asymmetric voting,
minimum spanning tree) plus sums of unanimity games, derived and written here from the definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from bayesval.games.utilities import KeylessUtility
from bayesval.games.weights import Semivalue, as_semivalue
from bayesval.validation import check_finite_array, check_int, check_real


def log_binomial(total, chosen) -> np.ndarray:
    """log binom(total, chosen), broadcast; -inf where chosen < 0 or chosen > total (no way to choose)."""
    total, chosen = np.broadcast_arrays(np.asarray(total, np.float64), np.asarray(chosen, np.float64))
    possible = (chosen >= 0) & (chosen <= total)
    logs = np.full(total.shape, -np.inf)
    a, b = total[possible], chosen[possible]
    logs[possible] = gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)
    return logs


def hypergeometric_probability(population, marked, draws, hits) -> np.ndarray:
    """P(exactly `hits` of the `marked` players are among `draws` drawn without replacement from `population`),
    broadcast: binom(marked, hits) binom(population - marked, draws - hits) / binom(population, draws); 0 where
    impossible."""
    logs = log_binomial(marked, hits) + log_binomial(np.subtract(population, marked), np.subtract(draws, hits))
    return np.exp(logs - log_binomial(population, draws))


class AnalyticGame:
    """A game with closed-form expected marginal contributions m_i(s), hence closed-form semivalues; a subclass
    gives `num_players` (a field or a property), `values_of` and `expected_marginals`."""

    num_players: int

    def values_of(self, masks) -> np.ndarray:
        """v of each coalition: masks (B, n) boolean -> (B,) float64."""
        raise NotImplementedError

    @property
    def utility(self) -> KeylessUtility:
        """The game's utility for `bayesval.games.semivalue`: of the masks alone, so a coalition has one value and the
        single-coalition groups of a sampled run are exact (`bayesval.games.utilities`)."""
        return KeylessUtility(self.values_of)

    def expected_marginals(self) -> np.ndarray:
        """(n, n): m_i(s) = E[v(S u i) - v(S)] over the coalitions S of size s = 0..n-1 without player i."""
        raise NotImplementedError

    def semivalue(self, semivalue: str | Semivalue = "shapley") -> np.ndarray:
        """The exact semivalue (n,): phi_i = sum_s binom(n-1, s) w(s) m_i(s) (Dubey, Neyman & Weber 1981)."""
        return self.expected_marginals() @ as_semivalue(semivalue).size_weights(self.num_players)


def _sizes(num_players: int) -> np.ndarray:
    return np.arange(num_players)


@dataclass(frozen=True)
class UnanimitySum(AnalyticGame):
    """v(S) = sum_T a_T 1[T subset of S]: a sum of unanimity games (Shapley 1953: they span all games).

    Player i adds a_T to S exactly when i is in T and S holds the other t - 1 members of T (t = |T|); for S uniform of
    size s among the n - 1 others that happens with the hypergeometric probability
    P(T minus i subset of S) = binom(n-t, s-t+1) / binom(n-1, s), so

        m_i(s) = sum_{T containing i} a_T binom(n-t, s-t+1) / binom(n-1, s).

    For Shapley phi_i = sum_{T containing i} a_T / t (Shapley 1953), for Banzhaf sum_{T containing i} a_T 2^(1-t).

    coalitions    the coalitions T, each a non-empty tuple of distinct player indices in 0..num_players-1
    coefficients  a_T, one finite number per coalition
    """

    coalitions: tuple[tuple[int, ...], ...]
    coefficients: tuple[float, ...]
    num_players: int

    def __post_init__(self) -> None:
        num_players = check_int("num_players", self.num_players, minimum=1)
        coalitions = tuple(tuple(sorted(check_int("a player index", p) for p in T)) for T in self.coalitions)
        for coalition in coalitions:
            in_range = bool(coalition) and 0 <= coalition[0] and coalition[-1] < num_players
            if not in_range or len(set(coalition)) != len(coalition):
                raise ValueError(
                    f"each coalition must be a non-empty tuple of distinct player indices in 0..{num_players - 1}, "
                    f"got {coalition}"
                )
        coefficients = check_finite_array("coefficients", self.coefficients, ndim=1)
        if len(coefficients) != len(coalitions):
            raise ValueError(f"coefficients must be one per coalition ({len(coalitions)}), got {len(coefficients)}")
        object.__setattr__(self, "num_players", num_players)
        object.__setattr__(self, "coalitions", coalitions)
        object.__setattr__(self, "coefficients", tuple(coefficients.tolist()))

    @classmethod
    def random(cls, num_players: int, num_terms: int, max_size: int, seed: int = 0) -> UnanimitySum:
        """`num_terms` coalitions of sizes uniform in 1..max_size, members uniform without replacement, coefficients
        log-normal (mu 0, sigma 1: positive, a few terms dominating), all from numpy's default_rng(seed)."""
        num_players = check_int("num_players", num_players, minimum=1)
        num_terms = check_int("num_terms", num_terms, minimum=1)
        max_size = check_int("max_size", max_size, minimum=1, maximum=num_players)
        rng = np.random.default_rng(check_int("seed", seed, minimum=0))
        sizes = rng.integers(1, max_size + 1, num_terms)
        coalitions = tuple(tuple(rng.choice(num_players, size, replace=False).tolist()) for size in sizes)
        return cls(coalitions, tuple(rng.lognormal(0.0, 1.0, num_terms).tolist()), num_players)

    def _membership(self) -> np.ndarray:
        """(K, n) boolean: which players each coalition holds."""
        membership = np.zeros((len(self.coalitions), self.num_players), bool)
        for row, coalition in enumerate(self.coalitions):
            membership[row, list(coalition)] = True
        return membership

    def values_of(self, masks) -> np.ndarray:
        membership = self._membership()
        present = np.asarray(masks, np.float64) @ membership.T.astype(np.float64)  # (B, K): members of T in S
        complete = present == membership.sum(axis=1)
        return complete.astype(np.float64) @ np.array(self.coefficients)

    def expected_marginals(self) -> np.ndarray:
        membership = self._membership()
        others_needed = membership.sum(axis=1, keepdims=True) - 1  # t - 1 per coalition
        sizes = _sizes(self.num_players)
        all_present = hypergeometric_probability(self.num_players - 1, others_needed, sizes, others_needed)
        return membership.T @ (np.array(self.coefficients)[:, None] * all_present)


@dataclass(frozen=True)
class Airport(AnalyticGame):
    """The airport game: v(S) = max_{j in S} c_j, 0 for the empty coalition (Littlechild & Owen 1973).

    With the distinct costs d_1 < ... < d_L and d_0 = 0, v = sum_l (d_l - d_(l-1)) u_l where u_l(S) = 1 when S holds
    a player of cost >= d_l (the runway segments S needs). Player i (cost >= d_l) adds segment l to S exactly when
    none of the k_l other players with cost >= d_l is in S; for S uniform of size s among the n - 1 others, with
    probability binom(n-1-k_l, s) / binom(n-1, s). So, ties included,

        m_i(s) = sum_{l: d_l <= c_i} (d_l - d_(l-1)) binom(n-1-k_l, s) / binom(n-1, s).

    For Shapley this is Littlechild & Owen's phi_i = sum_{l: d_l <= c_i} (d_l - d_(l-1)) / (k_l + 1): each segment's
    cost shared equally by the players who need it. Any finite costs (negative ones too: the sum telescopes to
    max_{j in S} c_j for every non-empty S).
    """

    costs: tuple[float, ...]

    def __post_init__(self) -> None:
        costs = check_finite_array("costs", self.costs, ndim=1)
        if len(costs) < 1:
            raise ValueError("costs must hold one cost per player, at least one")
        object.__setattr__(self, "costs", tuple(costs.tolist()))

    @classmethod
    def random(cls, num_players: int, seed: int = 0) -> Airport:
        """Integer costs uniform in 1..num_players (ties likely), from numpy's default_rng(seed)."""
        num_players = check_int("num_players", num_players, minimum=1)
        rng = np.random.default_rng(check_int("seed", seed, minimum=0))
        return cls(tuple(rng.integers(1, num_players + 1, num_players).astype(np.float64).tolist()))

    @property
    def num_players(self) -> int:
        return len(self.costs)

    def values_of(self, masks) -> np.ndarray:
        masks = np.asarray(masks, bool)
        highest = np.max(np.where(masks, np.array(self.costs), -np.inf), axis=1)
        return np.where(masks.any(axis=1), highest, 0.0)

    def expected_marginals(self) -> np.ndarray:
        costs = np.array(self.costs)
        levels = np.unique(costs)
        increments = np.diff(levels, prepend=0.0)
        others_at_or_above = (costs[None, :] >= levels[:, None]).sum(axis=1) - 1  # k_l
        none_in_coalition = hypergeometric_probability(
            self.num_players - 1, others_at_or_above[:, None], _sizes(self.num_players), 0
        )
        up_to_level = np.cumsum(increments[:, None] * none_in_coalition, axis=0)  # (L, n)
        return up_to_level[np.searchsorted(levels, costs)]


@dataclass(frozen=True)
class SymmetricVoting(AnalyticGame):
    """Majority voting: v(S) = 1 when |S| > n / 2, else 0.

    A player's vote turns S into a majority exactly when |S| = floor(n/2), for odd n (S has (n-1)/2 voters) and even n
    (S has n/2, one short of n/2 + 1): m_i(s) = 1[s = floor(n/2)], so phi_i = binom(n-1, s*) w(s*) with
    s* = floor(n/2); 1/n for Shapley.
    """

    num_players: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_players", check_int("num_players", self.num_players, minimum=1))

    def values_of(self, masks) -> np.ndarray:
        return (2 * np.asarray(masks, bool).sum(axis=1) > self.num_players).astype(np.float64)

    def expected_marginals(self) -> np.ndarray:
        pivotal = _sizes(self.num_players) == self.num_players // 2
        return np.tile(pivotal.astype(np.float64), (self.num_players, 1))


@dataclass(frozen=True)
class Shoes(AnalyticGame):
    """The shoes (glove) game: players 0..left-1 own a left shoe, the next `right` a right one, and
    v(S) = min(#left shoes in S, #right shoes in S), the pairs S can make.

    A left-shoe owner adds a pair to S exactly when S holds fewer left shoes (l, from the left - 1 other owners) than
    right ones (s - l): m_i(s) = sum_{l < s - l} binom(left-1, l) binom(right, s-l) / binom(n-1, s), a hypergeometric
    tail; the same with left and right swapped for a right-shoe owner.
    """

    left: int
    right: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "left", check_int("left", self.left, minimum=1))
        object.__setattr__(self, "right", check_int("right", self.right, minimum=1))

    @property
    def num_players(self) -> int:
        return self.left + self.right

    def values_of(self, masks) -> np.ndarray:
        masks = np.asarray(masks, bool)
        lefts, rights = masks[:, : self.left].sum(axis=1), masks[:, self.left :].sum(axis=1)
        return np.minimum(lefts, rights).astype(np.float64)

    def _fewer_of_own_kind(self, own: int) -> np.ndarray:
        """(n,): P(a uniform coalition of size s of the others holds fewer of one's own kind, from own - 1 others,
        than of the other kind)."""
        sizes, own_kind = _sizes(self.num_players)[:, None], _sizes(self.num_players)[None, :]
        probability = hypergeometric_probability(self.num_players - 1, own - 1, sizes, own_kind)
        return (probability * (2 * own_kind < sizes)).sum(axis=1)

    def expected_marginals(self) -> np.ndarray:
        return np.repeat(
            np.stack([self._fewer_of_own_kind(self.left), self._fewer_of_own_kind(self.right)]),
            [self.left, self.right],
            axis=0,
        )


@dataclass(frozen=True)
class Miner(AnalyticGame):
    """The miner game: v(S) = floor(|S| / 2), the pairs of miners S can form (each pair carries one gold bar).

    A miner completes a pair exactly when S is odd: m_i(s) = 1[s odd], so phi_i = sum_{s odd} binom(n-1, s) w(s);
    floor(n/2) / n for Shapley.
    """

    num_players: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_players", check_int("num_players", self.num_players, minimum=1))

    def values_of(self, masks) -> np.ndarray:
        return (np.asarray(masks, bool).sum(axis=1) // 2).astype(np.float64)

    def expected_marginals(self) -> np.ndarray:
        odd = _sizes(self.num_players) % 2 == 1
        return np.tile(odd.astype(np.float64), (self.num_players, 1))


@dataclass(frozen=True)
class WeightedVoting(AnalyticGame):
    """Weighted (asymmetric) voting: v(S) = 1 when the integer weights of S reach the quota, sum_{j in S} w_j >= q.

    Player i is pivotal for S when q - w_i <= w(S) < q, so m_i(s) = N_i(s) / binom(n-1, s) with N_i(s) the number of
    coalitions of the others of size s and weight in [q - w_i, q): coefficients of the generating function
    prod_{j != i} (1 + x y^(w_j)) (Mann & Shapley 1962, the Shapley value of weighted majority games), counted here
    by dynamic programming over the players once per distinct weight, on weights below q only: O(K n^2 q) for K
    distinct weights, so meant for small integer weights.

    weights  non-negative integers, one per player
    quota    a finite number
    """

    weights: tuple[int, ...]
    quota: float

    def __post_init__(self) -> None:
        weights = check_finite_array("weights", self.weights, ndim=1)
        if len(weights) < 1 or np.any(weights < 0) or np.any(weights != np.round(weights)):
            raise ValueError(f"weights must be non-negative integers, one per player, got {weights}")
        object.__setattr__(self, "weights", tuple(int(w) for w in weights))
        object.__setattr__(self, "quota", check_real("quota", self.quota))

    @property
    def num_players(self) -> int:
        return len(self.weights)

    def values_of(self, masks) -> np.ndarray:
        return (np.asarray(masks, np.float64) @ np.array(self.weights, np.float64) >= self.quota).astype(np.float64)

    def _losing_coalitions_by_size_and_weight(self, without: int) -> np.ndarray:
        """(n, W): the number of coalitions of the players other than `without` by size 0..n-1 and weight
        0..W-1, W = ceil(quota) (the weights where a coalition still loses)."""
        width = max(int(np.ceil(self.quota)), 0)
        counts = np.zeros((self.num_players, width))
        if width:
            counts[0, 0] = 1.0
        for player, weight in enumerate(self.weights):
            if player != without and weight < width:
                counts[1:, weight:] += counts[:-1, : width - weight].copy()
        return counts

    def expected_marginals(self) -> np.ndarray:
        weights = np.array(self.weights)
        marginals = np.zeros((self.num_players, self.num_players))
        for weight in np.unique(weights):
            players = np.flatnonzero(weights == weight)
            counts = self._losing_coalitions_by_size_and_weight(without=players[0])
            pivotal = np.arange(counts.shape[1]) >= self.quota - weight
            marginals[players] = counts[:, pivotal].sum(axis=1) * np.exp(
                -log_binomial(self.num_players - 1, _sizes(self.num_players))
            )
        return marginals


@dataclass(frozen=True)
class MinimumSpanningTree(AnalyticGame):
    """The minimum spanning tree (cost) game of Castro, Gómez & Tejada (2009, Sec. 4): the players are the nodes of a
    ring, each joined to its two neighbours by an edge of cost `ring_cost` and to a source by one of cost
    `source_cost` (no other edges), and v(S) is the cost of the cheapest tree that connects S to the source.

    S's players form k arcs of the ring (maximal runs of neighbours); each arc of L players is joined along the ring
    (L - 1 edges) and once to the source, so v(S) = ring_cost (|S| - k) + source_cost k, the ring whole (S = N) one
    arc of n - 1 ring edges. A player i joining S adds one arc where neither neighbour is in S, none where one is, and
    joins two arcs into one where both are, unless S is everyone else (then it closes the ring: still one arc):

        m_i(s) = ring_cost + (source_cost - ring_cost) (P(neither) - P(both) + 1[s = n - 1]),

    with P(neither) = binom(n-3, s) / binom(n-1, s) and P(both) = binom(n-3, s-2) / binom(n-1, s) for S uniform of
    size s among the n - 1 others. Every player is alike, so the Shapley value is v(N) / n for each.

    num_players  at least 3 (a ring)
    """

    num_players: int
    ring_cost: float = 1.0
    source_cost: float = 101.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_players", check_int("num_players", self.num_players, minimum=3))
        object.__setattr__(self, "ring_cost", check_real("ring_cost", self.ring_cost))
        object.__setattr__(self, "source_cost", check_real("source_cost", self.source_cost))

    def values_of(self, masks) -> np.ndarray:
        masks = np.asarray(masks, bool)
        members = masks.sum(axis=1)
        arcs = (masks & ~np.roll(masks, 1, axis=1)).sum(axis=1)  # players whose left neighbour is out: arc starts
        arcs = np.where(members == self.num_players, 1, arcs)  # the whole ring has no start, and is one arc
        return self.ring_cost * (members - arcs) + self.source_cost * arcs

    def expected_marginals(self) -> np.ndarray:
        n, sizes = self.num_players, _sizes(self.num_players)
        neither = hypergeometric_probability(n - 1, 2, sizes, 0)
        both = hypergeometric_probability(n - 1, 2, sizes, 2)
        closes = (sizes == n - 1).astype(np.float64)
        marginal = self.ring_cost + (self.source_cost - self.ring_cost) * (neither - both + closes)
        return np.tile(marginal, (n, 1))
