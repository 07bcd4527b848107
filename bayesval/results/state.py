"""The running sums of a sampled semivalue: what a result carries so that a run can resume and two runs can merge.

A sampler files each draw of index i into one of G groups g (first / middle / last coalition sizes for permutations
and semivalue sampling; coalitions with and without i for maximum sample reuse; coalition sizes for stratified
sampling and Latin permutations) with phi_i = sum_g c_g E[x_gi]. Per group and index the state keeps the count m,
the sum, the sum of squared deviations from the mean m2 (combined batch by batch with Chan, Golub & LeVeque 1983, so
it does not cancel as E[x^2] - E[x]^2 does: a group whose draws are all equal has m2 = 0 exactly) and the smallest
and largest draw.
The estimate is sum_g c_g mean_gi and its variance sum_g c_g^2 sigma~_gi^2 / m_gi, with the honest group variances
of `bayesval.results.variance`. Sums are float64 on the host, added batch after batch in a fixed order, so a resumed
run repeats an uninterrupted one to the last bit.

A utility that returns R estimates per coalition (R, B) is averaged over r before the draws are filed; the sums per
estimate are kept too, and the spread over r of the semivalues from each estimate alone adds var_r / R to the
variance: the utility's own error, which sampling more coalitions does not shrink when the utility reuses its
estimates (`permutation_shapley` has always done this). That spread has R - 1 degrees of freedom and counts part of
the utility's error twice; where the caller says the utility caches each coalition's estimates and their errors are
independent, the state keeps a `CoalitionNoise` record instead, and the utility's error is that of the exact semivalue
of the noisy game, estimated over classes of coalitions (`bayesval.results.coalition_noise`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from bayesval.results.coalition_noise import CoalitionNoise
from bayesval.results.serialisation import OldJsonMethods, register
from bayesval.results.variance import (
    exact_indices,
    index_dof,
    index_ranges,
    satterthwaite_dof,
    spread,
    variances_and_dof,
)


class Estimate(NamedTuple):
    """A sampled semivalue so far: values (n,), their variances (n,) and the variances' degrees of freedom (n,)."""

    values: np.ndarray
    variances: np.ndarray
    dof: np.ndarray


@register("bayesval.semivalue_state")
@dataclass
class SemivalueState(OldJsonMethods):
    """What resuming a sampled semivalue needs, and what identifies its game.

    semivalue, sampler    names of the semivalue and the sampler (with its options), e.g. 'shapley', 'permutation'
    coefficients          (G,) c_g of each group
    exact                 (G,) groups of a single coalition: exact where the utility gives a coalition one value
                          and their draws agree (`bayesval.results.variance.one_valued`)
    layers                (G,) groups that are strata of coalition sizes (one size, or positions no other group
                          draws from): their spread is within them
    sums                  (R, G, n) sums of the draws from each of the utility's R estimates
    m2, m3, m4            (G, n) sums of squared, cubed and fourth-power deviations of the draws (averaged over the
                          R estimates) from their group mean (m3 and m4: how far a variance can be trusted)
    counts                (G, n) draws per group and index
    low, high             (G, n) the smallest and largest draw (+inf and -inf before the first)
    evaluations           utility evaluations (coalitions valued) so far
    value_low, value_high the smallest and largest value of a coalition so far (the scale of a game whose draws
                          never varied; of v - u with a control variate)
    streams               per key (hex of its key data): [batch size, batches done]. The key and the batch size fix
                          every batch's coalitions: a run resumed with one of these keys (and its batch size) starts
                          at the next batch, one with a new key at batch 0
    rankings              (H, n) the last rankings (index order, best first), for rank-stability rules
    control_table         (2^n,) the control variate's surrogate u of every coalition in code order, or None: the
                          draws are then of v - u, and the estimate adds phi(u) (`bayesval.games.control`)
    control_semivalue     (n,) phi(u), exact (None without a control variate), or estimated
    control_variance      (n,) the variance of an estimated phi(u) (a multi-fidelity control: u known as a function
                          of the coalition, no table), None where phi(u) is exact; the estimate adds it
    control_dof           (n,) that variance's degrees of freedom
    keyed                 whether the utility takes a key (`bayesval.games.utilities`): its values of a coalition
                          are then draws, and its single-coalition groups are sampled (their spread the utility's
                          noise); True for a state saved before it was recorded (version 5 or earlier), whose
                          utility's form is unknown
    control_name          the name of an estimated control (`EstimatedControl.name`), which says which function of
                          the coalitions u is, so that a run resumes only against the u it sampled; None without
                          one, and in a state saved before it was recorded (version 4)
    noise                 the cached estimates of every coalition valued (`CoalitionNoise`), from which the utility's
                          error is estimated; None: it is the spread of the R per-estimate semivalues (none if R = 1)
    game                  the game's fingerprint (`bayesval.games.fingerprint.fingerprint`): {"id": the caller's
                          game_id} or {"utility": its qualified name, "probes": its values (R, P) on fixed probe
                          coalitions, "content": what it is made of, part by part (`bayesval.digests.content_parts`;
                          absent in a state saved before it was kept)}; None in a state saved before fingerprints (its
                          game cannot be checked)
    """

    semivalue: str
    sampler: str
    coefficients: np.ndarray
    exact: np.ndarray
    layers: np.ndarray
    sums: np.ndarray
    m2: np.ndarray
    m3: np.ndarray
    m4: np.ndarray
    counts: np.ndarray
    low: np.ndarray
    high: np.ndarray
    evaluations: int = 0
    value_low: float = np.inf
    value_high: float = -np.inf
    streams: dict[str, list[int]] = field(default_factory=dict)
    rankings: np.ndarray | None = None
    control_table: np.ndarray | None = None
    control_semivalue: np.ndarray | None = None
    noise: CoalitionNoise | None = None
    game: dict | None = None
    control_variance: np.ndarray | None = None
    control_dof: np.ndarray | None = None
    control_name: str | None = None
    keyed: bool = True

    ARRAYS = ("coefficients", "exact", "layers", "sums", "m2", "m3", "m4", "counts", "low", "high", "rankings")
    CONTROL = ("control_table", "control_semivalue")
    ESTIMATED = ("control_variance", "control_dof")  # an estimated control's, in place of a table
    # of its record (`to_record`; 5 before `keyed`, 4 before `control_name`, 3 before `game`, 2 before `noise`, 1
    # before control variates; an estimated control's arrays are optional from version 4: a state without one writes
    # none)
    version = 6

    @classmethod
    def empty(
        cls,
        semivalue: str,
        sampler: str,
        plan,
        num_repeats: int,
        num_players: int,
        control_table: np.ndarray | None = None,
        control_semivalue: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        game: dict | None = None,
        control_variance: np.ndarray | None = None,
        control_dof: np.ndarray | None = None,
        control_name: str | None = None,
        keyed: bool = False,
    ):
        """The state before the first batch of a sampler's `plan` (its group coefficients, exact groups, layers),
        with the control variate's table and semivalue where one is used, given the semivalue's `weights` w(s) an
        empty record of the coalitions' cached estimates (R > 1: `CoalitionNoise`), and the `game`'s fingerprint; an
        estimated control has no table, and its phi(u)'s variance, degrees of freedom and name instead, and whether
        the utility is `keyed`."""
        groups = len(plan.coefficients)
        return cls(
            semivalue,
            sampler,
            np.asarray(plan.coefficients, np.float64),
            np.asarray(plan.exact, bool),
            np.asarray(plan.layers, bool),
            np.zeros((num_repeats, groups, num_players)),
            np.zeros((groups, num_players)),
            np.zeros((groups, num_players)),
            np.zeros((groups, num_players)),
            np.zeros((groups, num_players), np.int64),
            np.full((groups, num_players), np.inf),
            np.full((groups, num_players), -np.inf),
            rankings=np.zeros((0, num_players), np.int64),
            control_table=control_table,
            control_semivalue=control_semivalue,
            noise=None if weights is None or num_repeats == 1 else CoalitionNoise.empty(weights, num_repeats),
            game=game,
            control_variance=control_variance,
            control_dof=control_dof,
            control_name=control_name,
            keyed=keyed,
        )

    @property
    def num_players(self) -> int:
        return self.counts.shape[1]

    @property
    def num_repeats(self) -> int:
        return self.sums.shape[0]

    @property
    def index_counts(self) -> np.ndarray:
        """Draws per index (n,) over the groups the semivalue weighs."""
        return self.counts[self.coefficients != 0].sum(axis=0)

    @property
    def every_group_drawn(self) -> bool:
        """Whether every index has a draw in every group the semivalue weighs (else its value is undefined: a run
        goes on until it has, whatever its stopping rule says)."""
        return bool((self.counts[self.coefficients != 0] > 0).all())

    @property
    def batch_draws(self) -> int:
        """Draws made by batches so far over every key, batch size times batches: the permutations of a permutation
        sampler (whose counts per index also hold the exact sizes' valuations)."""
        return sum(size * done for size, done in self.streams.values())

    @property
    def ranges(self) -> np.ndarray:
        """The range of each index's draws (n,): 0 where they were all equal."""
        return index_ranges(self)

    @property
    def exact_indices(self) -> np.ndarray:
        """Indices whose value is exact (every weighted group a single coalition with equal draws)."""
        return exact_indices(self)

    def index_diagnostics(self, dof: np.ndarray, verdicts: list[str]) -> dict[str, list]:
        """Per index, a result's `diagnostics["indices"]`: its draws, their range (0: all equal), whether its value
        is exact, the degrees of freedom `dof` of its standard error and its verdict (`variance.judged`)."""
        return {
            "draws": self.index_counts.tolist(),
            "range": self.ranges.tolist(),
            "exact": self.exact_indices.tolist(),
            "dof": np.asarray(dof).tolist(),
            "verdict": list(verdicts),
        }

    def add(self, batch, values, masks=None, names: list[str] | None = None) -> None:
        """File one batch's `BatchStatistics` (sums (R, G, n), m2, counts, low, high (G, n)) and its coalitions'
        values (R, M), and with a record of the coalitions' cached estimates, those of its coalitions `masks` (M, n)
        (`names`, the players', name a coalition in an error)."""
        combined = _combined(self, *(np.asarray(part) for part in batch))
        self.sums, self.m2, self.m3, self.m4, self.counts, self.low, self.high = combined
        averaged = np.asarray(values).mean(axis=0)
        self.value_low = min(self.value_low, float(averaged.min()))
        self.value_high = max(self.value_high, float(averaged.max()))
        self.evaluations += averaged.size
        if self.noise is not None:
            self.noise = self.noise.added(np.asarray(masks), np.asarray(values), names)

    def estimate(self) -> Estimate:
        """Values (n,), their variances (n,) and the variances' degrees of freedom (n,); inf variance where a
        weighted group has fewer than 2 draws (`bayesval.results.variance`). With a control variate the draws are of
        v - u and phi(u) is added: exact, it adds no variance; estimated, its variance with its degrees of freedom."""
        used = self.coefficients != 0
        counts = self.counts[used].astype(np.float64)
        coefficients = self.coefficients[used][:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            per_repeat = (coefficients * self.sums[:, used] / counts).sum(axis=1)  # (R, n)
            variances, group_dofs, borrowed = (part[used] for part in variances_and_dof(self))
            group_terms = coefficients**2 * variances / counts  # (G', n)
        terms, dofs = group_terms.sum(axis=0)[None], index_dof(group_terms, group_dofs, borrowed)[None]
        if self.noise is not None:  # the utility's own error in the exact semivalue of its cached estimates
            noise, noise_dof = self.noise.variance()
            terms, dofs = np.concatenate([terms, noise[None]]), np.concatenate([dofs, noise_dof[None]])
        elif self.num_repeats > 1:  # the utility's own error, from R - 1 degrees of freedom
            terms = np.concatenate([terms, per_repeat.var(axis=0, ddof=1)[None] / self.num_repeats])
            dofs = np.concatenate([dofs, np.full((1, self.num_players), self.num_repeats - 1.0)])
        if self.control_variance is not None:  # an estimated phi(u), from a key of its own: independent
            terms = np.concatenate([terms, self.control_variance[None]])
            dofs = np.concatenate([dofs, self.control_dof[None]])
        values = per_repeat.mean(axis=0)
        if self.control_semivalue is not None:
            values = values + self.control_semivalue
        return Estimate(values, terms.sum(axis=0), satterthwaite_dof(terms, dofs))

    def same_game(self, other: SemivalueState) -> str | None:
        """None if `other` sampled the same game the same way, else what differs (for an error)."""
        mine = (self.num_players, self.semivalue, self.sampler, self.num_repeats)
        theirs = (other.num_players, other.semivalue, other.sampler, other.num_repeats)
        labels = ("num_players", "semivalue", "sampler", "estimates per coalition (R)")
        for label, a, b in zip(labels, mine, theirs):
            if a != b:
                return f"{label} {a!r} != {b!r}"
        game = game_difference(self.game, other.game)
        if game is not None:
            return f"game {game}"
        if not np.array_equal(self.coefficients, other.coefficients):  # semivalue sampling's bins follow the batch size
            return f"groups of coalition sizes (coefficients {self.coefficients} != {other.coefficients})"
        if self.keyed != other.keyed:
            return f"the utility's form ({_form(self)} != {_form(other)})"
        if not same_control(self.control_table, other.control_table) or not same_control(
            self.control_semivalue, other.control_semivalue
        ):
            return f"control variate {describe_control(self.control_table)} != {describe_control(other.control_table)}"
        if self.control_name != other.control_name:
            return f"estimated control {self.control_name!r} != {other.control_name!r}"
        if (self.noise is None) != (other.noise is None):
            return f"the utility's error {describe_error(self)} != {describe_error(other)}"
        return None

    def merged(self, other: SemivalueState, names: list[str] | None = None) -> SemivalueState:
        """The state of both runs' draws together (the same game, no key stream in both); `names`, the players',
        name a coalition in an error."""
        difference = self.same_game(other)
        if difference is not None:
            raise ValueError(f"cannot merge the results of different games: {difference}")
        if renamed(self.game, other.game):
            warnings.warn(
                f"merging the results of utilities named {self.game['utility']} and {other.game['utility']}, which "
                "agree on the probe coalitions: merged as one game",
                UserWarning,
                stacklevel=3,
            )
        if set(self.streams) & set(other.streams):
            raise ValueError(
                "cannot merge two results sampled from the same key: their first batches are the same draws, which "
                "would count twice; run the second with another key, or resume the first (resume_from=...)"
            )
        moments = (other.sums, other.m2, other.m3, other.m4, other.counts, other.low, other.high)
        sums, m2, m3, m4, counts, low, high = _combined(self, *moments)
        return replace(
            self,
            sums=sums,
            m2=m2,
            m3=m3,
            m4=m4,
            counts=counts,
            low=low,
            high=high,
            evaluations=self.evaluations + other.evaluations,
            value_low=min(self.value_low, other.value_low),
            value_high=max(self.value_high, other.value_high),
            streams=self.streams | other.streams,
            rankings=np.zeros((0, self.num_players), np.int64),
            noise=None if self.noise is None else self.noise.merged(other.noise, names),
        )

    def copy(self) -> SemivalueState:
        arrays = {
            name: np.array(getattr(self, name))
            for name in self.ARRAYS + self.CONTROL + self.ESTIMATED
            if getattr(self, name) is not None
        }
        noise = None if self.noise is None else self.noise.copy()
        return replace(self, streams={k: list(v) for k, v in self.streams.items()}, noise=noise, **arrays)

    def to_record(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The state as a record of `bayesval.results.serialisation` (version 6): meta the scalars (semivalue,
        sampler, evaluations, value_low, value_high, streams, game, control_name, keyed), arrays `ARRAYS` (rankings only
        when kept), with a control variate `CONTROL` (an estimated one: control_semivalue and `ESTIMATED`, no table),
        and with a `CoalitionNoise` record its arrays, named noise_ and theirs."""
        meta = {
            "semivalue": self.semivalue,
            "sampler": self.sampler,
            "evaluations": self.evaluations,
            "value_low": self.value_low,
            "value_high": self.value_high,
            "streams": self.streams,
            "game": self.game,
            "control_name": self.control_name,
            "keyed": self.keyed,
        }
        kept = self.ARRAYS + self.CONTROL + self.ESTIMATED
        arrays = {name: getattr(self, name) for name in kept if getattr(self, name) is not None}
        if self.noise is not None:
            arrays |= {NOISE + name: getattr(self.noise, name) for name in CoalitionNoise.ARRAYS}
        return meta, arrays

    @classmethod
    def from_record(cls, meta: dict, arrays: dict[str, np.ndarray], *, version: int = 6) -> SemivalueState:
        """The state `to_record` wrote, at version 6, 5 (before `keyed`: the utility's form is unknown, so its
        single-coalition groups are sampled, as a keyed utility's), 4 (before `control_name`: an estimated control's
        is None, and
        the run cannot be resumed against it), 3 (before `game`:
        its game has no fingerprint, None), 2 (before `noise`: the utility's error is the per-estimate spread) or 1
        (before control variates: its draws are of the game itself). A state saved before m3 and m4 were kept (version
        1: they were added as optional arrays) gets the moments of normal draws (m3 = 0, m4 = 3 m2^2 / m): its variances
        count as estimated from m - 1 degrees of freedom."""
        noise_names = tuple(NOISE + name for name in CoalitionNoise.ARRAYS)
        known = cls.ARRAYS + (cls.CONTROL if version >= 2 else ()) + (noise_names if version >= 3 else ())
        known += cls.ESTIMATED if version >= 4 else ()
        unknown = sorted(set(arrays) - set(known))
        if unknown:
            raise ValueError(f"it holds arrays no semivalue state has: {['state_' + name for name in unknown[:5]]}")
        if "m4" not in arrays:
            counts = np.maximum(arrays["counts"], 1)
            arrays = arrays | {"m3": np.zeros_like(arrays["m2"]), "m4": 3 * arrays["m2"] ** 2 / counts}
        _check_control_arrays(arrays)
        players = np.shape(arrays["counts"])[-1]
        if "control_table" in arrays and (
            np.shape(arrays["control_table"]) != (2**players,) or np.shape(arrays["control_semivalue"]) != (players,)
        ):
            raise ValueError(
                f"its control variate does not fit its {players} players: state_control_table must hold {2**players} "
                f"values and state_control_semivalue {players}"
            )
        noise = _noise_of(arrays, noise_names, players)
        rest = {name: value for name, value in arrays.items() if name not in noise_names}
        return cls(**meta, **rest, noise=noise)


def _form(state: SemivalueState) -> str:
    """In words, the form of a state's utility (`SemivalueState.keyed`)."""
    if state.keyed:
        return "a utility of a key, or a state saved before its form was recorded: its single coalitions sampled"
    return "a KeylessUtility: its single coalitions exact"


def game_difference(game: dict | None, other: dict | None, labels: tuple[str, str] | None = None) -> str | None:
    """None where two fingerprints (`SemivalueState.game`) may be of the same game, else how they differ, in words
    ("A != B", or "<labels[0]> A, <labels[1]> B"): their game_ids; their probe values (compared to a relative 1e-6:
    the same utility on another machine may round otherwise); or, for utilities of one name, what they are made of
    (`content_differences`). None where either is unknown (a state saved before fingerprints). Another name alone is
    no difference (`renamed`)."""
    if game is None or other is None:
        return None
    first, second = ("", " !=") if labels is None else (f"{labels[0]} ", f", {labels[1]}")
    if game.get("id") is not None or other.get("id") is not None:
        same = game.get("id") == other.get("id")
        return None if same else f"{first}{describe_game(game)}{second} {describe_game(other)}"
    mine, theirs = np.asarray(game["probes"], np.float64), np.asarray(other["probes"], np.float64)
    if mine.shape != theirs.shape or not np.allclose(mine, theirs, rtol=1e-6, atol=1e-12):
        return f"{first}{describe_game(game)}{second} {describe_game(other)}"
    differing = content_differences(game, other)
    if differing:
        return (
            f"{first}{game['utility']}{second} one of that name made of other contents (its {', '.join(differing)} "
            "differ), though they agree on the probe coalitions"
        )
    return None


def content_differences(game: dict, other: dict) -> list[str]:
    """The parts (`bayesval.digests.content_parts`: 'attribute costs', 'closure data', 'code', ...) that differ
    between two fingerprints of a utility of one name; none where the names differ or either was saved without
    its contents (before they were kept, 2026-12-01)."""
    mine, theirs = game.get("content"), other.get("content")
    if mine is None or theirs is None or game.get("utility") != other.get("utility"):
        return []
    return sorted(part for part in set(mine) | set(theirs) if mine.get(part) != theirs.get(part))


def renamed(game: dict | None, other: dict | None) -> bool:
    """Whether two fingerprints of the same game name their utilities differently (worth a warning, not a refusal:
    a function renamed or wrapped in a lambda values the same game)."""
    names = [None if fingerprint is None else fingerprint.get("utility") for fingerprint in (game, other)]
    return None not in names and names[0] != names[1]


def describe_game(game: dict | None) -> str:
    """A fingerprint in a few words, for errors."""
    if game is None:
        return "unknown (saved before results kept their game's fingerprint)"
    if game.get("id") is not None:
        return f"game_id={game['id']!r}"
    probes = np.asarray(game["probes"], np.float64).mean(axis=0)
    return f"{game['utility']} (values {np.array2string(probes, precision=6)} on the probe coalitions)"


def same_control(table: np.ndarray | None, other: np.ndarray | None) -> bool:
    """Whether two states' control variates are the same surrogate (both none, or equal on every coalition)."""
    if table is None or other is None:
        return table is None and other is None
    return np.array_equal(table, other)


def describe_control(table: np.ndarray | None) -> str:
    """A control variate's surrogate in a few words, for errors."""
    return "none" if table is None else f"a surrogate of {table.size} coalitions"


def describe_error(state: SemivalueState) -> str:
    """How a state estimates the utility's own error, in a few words (for errors and diagnostics)."""
    if state.noise is not None:
        return f"the exact semivalue's, from the cached estimates of {state.noise.num_coalitions} coalitions"
    if state.num_repeats > 1:
        return f"the spread of the semivalues of each of the {state.num_repeats} estimates alone"
    return "none (one estimate a coalition)"


NOISE = "noise_"  # the prefix of the `CoalitionNoise` arrays in a state's record


def _check_control_arrays(arrays: dict[str, np.ndarray]) -> None:
    """A record's control variate is whole: none, a table with its phi(u), or an estimated phi(u) with its variance
    and degrees of freedom (no table)."""
    present = {name for name in SemivalueState.CONTROL + SemivalueState.ESTIMATED if name in arrays}
    wholes = (set(), {"control_table", "control_semivalue"}, {"control_semivalue", *SemivalueState.ESTIMATED})
    if present not in wholes:
        raise ValueError(
            f"it holds part of a control variate ({sorted('state_' + name for name in present)}): "
            "state_control_table and state_control_semivalue go together, and an estimated control's "
            "state_control_semivalue, state_control_variance and state_control_dof"
        )


def _noise_of(arrays: dict[str, np.ndarray], names: tuple[str, ...], players: int) -> CoalitionNoise | None:
    """The `CoalitionNoise` in a record's arrays, None if it has none, or a ValueError for part of one or one that
    does not fit the state's players and estimates."""
    present = [name for name in names if name in arrays]
    if not present:
        return None
    if len(present) != len(names):
        raise ValueError(f"it holds part of a coalition noise record: {sorted(set(names) - set(present))} are missing")
    noise = CoalitionNoise(*(np.asarray(arrays[name]) for name in names))
    repeats = np.shape(arrays["sums"])[0]
    fits = (
        noise.weights.shape == (players,)
        and noise.masks.shape[1:] == (-(-players // 8),)
        and noise.estimates.shape[1:] == (repeats,)
        and len(noise.masks) == len(noise.estimates)
    )
    if not fits:
        raise ValueError(
            f"its coalition noise record does not fit its {players} players and {repeats} estimates per coalition: "
            f"noise_weights ({players},), noise_masks (E, {-(-players // 8)}) and noise_estimates (E, {repeats})"
        )
    return noise


def _combined(state: SemivalueState, sums, m2, m3, m4, counts, low, high):
    """The state's (sums, m2, m3, m4, counts, low, high) with another set of draws' added: the central moment sums by
    the pairwise updates of Chan, Golub & LeVeque (1983) and Pebay (2008, Eqs. 2.1-2.3), with delta the difference of
    the two means and m = m_a + m_b,

        m2 = m2_a + m2_b + delta^2 m_a m_b / m
        m3 = m3_a + m3_b + delta^3 m_a m_b (m_a - m_b) / m^2 + 3 delta (m_a m2_b - m_b m2_a) / m
        m4 = m4_a + m4_b + delta^4 m_a m_b (m_a^2 - m_a m_b + m_b^2) / m^3 + 6 delta^2 (m_a^2 m2_b + m_b^2 m2_a) / m^2
             + 4 delta (m_a m3_b - m_b m3_a) / m,

    and exactly 0 where every draw is the same (to rounding)."""
    a, b = state.counts.astype(np.float64), np.asarray(counts, np.float64)
    total = a + b
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = sums.mean(axis=0) / b - state.sums.mean(axis=0) / a
        delta = np.where((a > 0) & (b > 0), delta, 0.0)
        share = np.where(total > 0, a * b / np.maximum(total, 1), 0.0)  # m_a m_b / m
        fraction_a, fraction_b = (np.where(total > 0, x / np.maximum(total, 1), 0.0) for x in (a, b))
    new_m2 = state.m2 + m2 + delta**2 * share
    new_m3 = (
        state.m3
        + m3
        + delta**3 * share * (fraction_a - fraction_b)
        + 3 * delta * (fraction_a * m2 - fraction_b * state.m2)
    )
    new_m4 = (
        state.m4
        + m4
        + delta**4 * share * (fraction_a**2 - fraction_a * fraction_b + fraction_b**2)
        + 6 * delta**2 * (fraction_a**2 * m2 + fraction_b**2 * state.m2)
        + 4 * delta * (fraction_a * m3 - fraction_b * state.m3)
    )
    low, high = np.minimum(state.low, low), np.maximum(state.high, high)
    equal = spread(low, high) == 0
    new_m2, new_m3, new_m4 = (np.where(equal, 0.0, moment) for moment in (new_m2, new_m3, new_m4))
    return state.sums + sums, new_m2, new_m3, new_m4, total.astype(np.int64), low, high


class CoalitionDiagnostics(NamedTuple):
    """Each coalition a party valuation sampled, with its convergence diagnostics, in the order they were sampled:
    its members (one 0/1 per party), the worst R-hat and bulk ESS over its repeats, its dropped chains and
    divergences, the rerun that sampled it (0: the first call), and whether every coalition converged. The names
    are those of a result's `diagnostics`, which shows the same lists."""

    coalitions: list[list[int]]
    r_hat: list[float]
    ess: list[float]
    dropped_chains: list[int]
    divergences: list[int]
    reruns: list[int]
    converged: bool


PER_COALITION = CoalitionDiagnostics._fields[:-1]  # the per-coalition lists, without the flag
# the arrays of each list in a record, with the type of its entries
PER_COALITION_ARRAYS = dict(zip(PER_COALITION, (np.int64, np.float64, np.float64, np.int64, np.int64, np.int64)))


@register("bayesval.coalition_estimates")
@dataclass(frozen=True)
class CoalitionEstimates:
    """What resuming a party valuation needs, and what identifies its game: the estimates of every coalition it
    sampled, so that a later valuation of the same game (`valuate(..., resume_from=result)`) takes them over instead
    of sampling those coalition posteriors again (Sim et al. 2023, Algorithm 2, lines 4-13, is the costly part),
    and their diagnostics, from which the later valuation's go on.

    game         the game's fingerprint (hex SHA-256 of the model, the releases and every setting that shapes an
                 estimate, `bayesval.parties.surprise.game_fingerprint`); a valuation resumes only the same game
    estimates    coalition bitmask (bit i: party i is a member) -> its (R,) estimates of v_C, one per repeat
    diagnostics  the sampled coalitions' `CoalitionDiagnostics`; None where none were kept (a state built by hand,
                 or one whose result lacks them), which does not resume

    A result saved before this state existed kept the game and the estimates in its `diagnostics` ("game",
    "coalition_estimates"), and one saved at version 1 of this record its diagnostics there only: `from_diagnostics`
    and `with_diagnostics_of` turn them into this state when such a result is loaded, the one place where a resume
    reads a result's `diagnostics`.
    """

    game: str
    estimates: dict[int, np.ndarray]
    diagnostics: CoalitionDiagnostics | None = None

    version = 2  # of its record (`to_record`); the kind is set by `register`

    def to_record(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The state as a record of `bayesval.results.serialisation` (version 2): meta the game (and "converged",
        where the diagnostics are kept), arrays codes (C,) int64 bitmasks in increasing order and values (C, R)
        float64, their estimates, and the diagnostics' lists in the order sampled: coalitions (S, n) int64 and
        r_hat, ess (S,) float64, dropped_chains, divergences, reruns (S,) int64 (version 1: no diagnostics)."""
        codes = sorted(self.estimates)
        values = [np.asarray(self.estimates[code], np.float64) for code in codes]
        arrays = {"codes": np.asarray(codes, np.int64), "values": np.stack(values) if values else np.zeros((0, 0))}
        meta = {"game": self.game}
        if self.diagnostics is not None:
            meta["converged"] = bool(self.diagnostics.converged)
            for name, kind in PER_COALITION_ARRAYS.items():
                arrays[name] = np.asarray(getattr(self.diagnostics, name), kind)
            if not len(arrays["coalitions"]):
                arrays["coalitions"] = np.zeros((0, 0), np.int64)
        return meta, arrays

    @classmethod
    def from_record(cls, meta: dict, arrays: dict[str, np.ndarray], *, version: int = 2) -> CoalitionEstimates:
        """The state `to_record` wrote; of version 1, without its diagnostics (`with_diagnostics_of` adds them from
        its result's)."""
        codes, values = np.asarray(arrays["codes"]), np.asarray(arrays["values"], np.float64)
        if codes.ndim != 1 or len(values) != len(codes):
            raise ValueError(f"coalition estimates need one row of values per code, got {len(values)} for {len(codes)}")
        diagnostics = None
        if version >= 2 and "converged" in meta:
            lists = [np.asarray(arrays[name], kind).tolist() for name, kind in PER_COALITION_ARRAYS.items()]
            if len({len(entries) for entries in lists}) != 1:
                raise ValueError(
                    f"coalition diagnostics need one entry per sampled coalition in each of {PER_COALITION}"
                )
            diagnostics = CoalitionDiagnostics(*lists, bool(meta["converged"]))
        return cls(str(meta["game"]), {int(code): row for code, row in zip(codes, values)}, diagnostics)

    def with_diagnostics_of(self, diagnostics: dict) -> CoalitionEstimates:
        """This state with the coalition diagnostics that a result saved before version 2 of this record kept in its
        `diagnostics` only (`CoalitionDiagnostics`' names; "reruns" missing in a result saved before reruns existed:
        none was rerun); as it is where it has them or the result lacks them."""
        if self.diagnostics is not None or not all(name in diagnostics for name in (*PER_COALITION[:-1], "converged")):
            return self
        sampled = len(diagnostics["coalitions"])
        lists = [list(diagnostics.get(name, [0] * sampled)) for name in PER_COALITION]
        return replace(self, diagnostics=CoalitionDiagnostics(*lists, bool(diagnostics["converged"])))

    @classmethod
    def from_diagnostics(cls, diagnostics: dict) -> tuple[CoalitionEstimates | None, dict]:
        """The state a result saved before it existed kept in its diagnostics ("game" and "coalition_estimates",
        bitmask -> estimates, and the coalitions' diagnostics), and the diagnostics without the first two; (None,
        diagnostics) if it has none."""
        if "coalition_estimates" not in diagnostics or "game" not in diagnostics:
            return None, diagnostics
        rest = {name: value for name, value in diagnostics.items() if name not in ("game", "coalition_estimates")}
        estimates = diagnostics["coalition_estimates"]
        state = cls(
            str(diagnostics["game"]),
            {int(code): np.asarray(value, np.float64) for code, value in estimates.items()},
        )
        return state.with_diagnostics_of(rest), rest
