"""Reward control (Sim et al. 2023, Sec. 5): give party i posterior samples q_i whose surprise r_i hits its target
r*_i, by likelihood tempering (kappa, Sec. 5.2, recommended) or by noise addition (tau, Sec. 5.1).

Both search a noisy, (near-)monotone r(parameter) with a bracketing root finder (Algorithm 2, lines 20-31), all
parties in lockstep: each round, every unfinished party proposes trials inside its bracket and all of them run in
one sampler call (`RewardSampler.slots` trials per call). A trial's r is a k-NN KL estimate with a standard error, so
a party accepts a trial once |r - r*| <= z * se, se pooled over its trials (each trial's own se rests on few
repeats); it also stops when its bracket is narrower than `parameter_tolerance` (relative) or after `max_calls`
sampler calls, keeping the closest trial. Where a bracket still ends at the prior (tempering's first round,
kappa in (0, 1)) nothing is known of r in between, so the trials split it evenly in log(parameter), searches that
share the bracket sharing one finer split. Inside any other bracket the trials are regula falsi in log(parameter)
(r grows about linearly in log kappa over the decades that matter) and, with more slots, pairs straddling it at
r-steps of twice the acceptance tolerance, so that a falsi point a little off still has a neighbour within reach.
"""

from __future__ import annotations

import itertools
import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.inference.data import NoiseAwareData
from bayesval.parties.rewards.sampling import Evaluation, RewardSampler
from bayesval.privacy.accounting import epsilon_at, gaussian_event, rdp_epsilon_at, zcdp_event
from bayesval.privacy.mechanisms import add_noise
from bayesval.privacy.noise import NoiseSource, fingerprint
from bayesval.validation import check_count, check_positive, user_stacklevel

SAFEGUARD = 0.05  # a falsi trial stays this fraction of the bracket away from its ends
FLOOR = 1e-3  # a bracket starting at parameter 0 is split in log space from FLOOR * its upper end
SCAN_FACTOR = 4.0  # noise addition's upward scan multiplies tau by this


@dataclass
class Search:
    """One party's search: its trials (tempering: the list every party shares), the accepted trial, the sampler
    calls it took part in, and whether the accepted trial met the tolerance."""

    target: float
    trials: list[Evaluation]
    increasing: bool
    calls: int = 0
    accepted: Evaluation | None = None
    reached: bool = False

    def bracket(self) -> tuple[Evaluation, Evaluation] | None:
        """Adjacent trials (by parameter) on either side of the target; None before any trial falls below it."""
        ordered = sorted(self.trials, key=lambda t: t.parameter)
        if self.increasing:
            below = [j for j, t in enumerate(ordered) if t.value < self.target]
            j = below[-1]
            return ordered[j], ordered[min(j + 1, len(ordered) - 1)]
        j = next((j for j, t in enumerate(ordered) if t.value < self.target), None)
        return None if j is None else (ordered[j - 1], ordered[j])

    def closest(self, candidates=None) -> Evaluation:
        usable = [t for t in (self.trials if candidates is None else candidates) if t.draws is not None]
        return min(usable, key=lambda t: abs(t.value - self.target))

    def tolerance(self, z: float) -> float:
        spread = [t.stderr for t in self.trials if t.draws is not None]
        return z * float(np.sqrt(np.mean(np.square(spread))))


def _log_ends(lo: Evaluation, hi: Evaluation) -> tuple[float, float]:
    """The bracket (lo, hi) in log(parameter), from log(FLOOR * hi) where lo is at parameter 0 (tempering's prior,
    noise addition's grand posterior): there r(parameter) is flat in log(parameter) below FLOOR * hi."""
    return math.log(lo.parameter if lo.parameter > 0 else FLOOR * hi.parameter), math.log(hi.parameter)


def _log_grid(lo: Evaluation, hi: Evaluation, count: int) -> list[float]:
    """`count` trials splitting (lo, hi) evenly in log(parameter) (`_log_ends`)."""
    a, b = _log_ends(lo, hi)
    return [math.exp(a + j / (count + 1) * (b - a)) for j in range(1, count + 1)]


def _falsi_and_neighbours(lo: Evaluation, hi: Evaluation, target: float, count: int, tolerance: float) -> list[float]:
    """`count` trials inside (lo, hi): regula falsi in log(parameter) (`_log_ends`), then neighbours at r-steps of
    +-2 tolerance (on the bracket's secant), each kept SAFEGUARD of the bracket away from its ends."""
    a, b = _log_ends(lo, hi)
    rise = hi.value - lo.value
    falsi = (target - lo.value) / rise if rise != 0 else 0.5
    step = 2 * tolerance / abs(rise) if rise != 0 else 1 / (count + 1)
    offsets = [0.0] + [sign * step * (j // 2 + 1) for j, sign in zip(range(count - 1), itertools.cycle((-1, 1)))]
    fractions = [min(max(falsi + offset, SAFEGUARD), 1 - SAFEGUARD) for offset in offsets]
    return [math.exp(a + f * (b - a)) for f in dict.fromkeys(fractions)]


def _lockstep(
    mechanism: RewardMechanism, sampler: RewardSampler, searches: list[Search], inputs_for, scan_start=None
) -> None:
    """Rounds of trials for every unfinished search, one sampler call per round, until each search is done."""
    for round_number in itertools.count(1):
        active = []
        for search in searches:
            if search.accepted is not None:
                continue
            tolerance = search.tolerance(mechanism.z)
            hits = [t for t in search.trials if t.draws is not None and abs(t.value - search.target) <= tolerance]
            bracket = search.bracket()
            narrow = bracket is not None and (
                bracket[1].parameter - bracket[0].parameter <= mechanism.parameter_tolerance * bracket[1].parameter
            )
            if hits or narrow or search.calls >= mechanism.max_calls:
                search.accepted = search.closest(hits or None)
                search.reached = bool(hits) or narrow
            else:
                active.append((search, bracket))
        if not active:
            return
        slots = max(1, sampler.slots // len(active))
        trials = []
        on_grid = [b is not None and b[0].parameter == mechanism.prior_parameter for _, b in active]
        for sharing in _by_bracket([pair for pair, grid in zip(active, on_grid) if grid]).values():
            grid = _log_grid(*sharing[0][1], sampler.slots * len(sharing) // len(active))
            trials += [(sharing[j % len(sharing)][0], parameter) for j, parameter in enumerate(grid)]
        for (search, bracket), grid in zip(active, on_grid):
            if grid:
                continue  # on the shared grid above
            if bracket is None:  # noise addition: scan tau upward to the first trial below the target
                top = max(t.parameter for t in search.trials)
                start = top if top > 0 else scan_start / SCAN_FACTOR
                parameters = [start * SCAN_FACTOR ** (j + 1) for j in range(slots)]
            else:
                tolerance = search.tolerance(mechanism.z)
                parameters = _falsi_and_neighbours(*bracket, search.target, slots, tolerance)
            trials += [(search, parameter) for parameter in parameters]
        calls_before = sampler.calls
        stage = (
            f"reward search by {mechanism.name}, round {round_number}: posteriors of the rewards of {len(active)} "
            f"part{'y' if len(active) == 1 else 'ies'} at {len(trials)} trial values of {mechanism.symbol}"
        )
        evaluations = sampler.evaluate([inputs_for(s, p) for s, p in trials], [p for _, p in trials], stage=stage)
        for (search, _), evaluation in zip(trials, evaluations):
            search.trials.append(evaluation)
        for search, _ in active:
            search.calls += sampler.calls - calls_before


def _by_bracket(active) -> dict:
    """Searches grouped by the very trials that bound them (tempering's searches share their trials)."""
    groups: dict = {}
    for search, bracket in active:
        groups.setdefault((id(bracket[0]), id(bracket[1])), []).append((search, bracket))
    return groups


class RewardMechanism(ABC):
    """What `allocate` asks of a reward mechanism (Sim et al. 2023, Algorithm 2, lines 15-31): one parameter that
    moves a party's reward q_i from the grand coalition's posterior (`grand_parameter`) to the prior
    (`prior_parameter`), a `solve` that finds each searched party's parameter for its target r*_i, and the privacy
    each party keeps inside each reward (`effective_epsilons`, property P1). Both mechanisms answer the same calls, so
    the allocation never asks which one it holds.

    name             how results and messages name it ('tempering', 'noise addition')
    symbol           its parameter's symbol in messages and tables ('kappa', 'tau')
    grand_parameter  the parameter at which q_i is p(theta | o_N); prior_parameter, at which q_i is p(theta)
    max_calls        sampler calls per party at most (the warning for unmet targets names it)
    """

    name: ClassVar[str]
    symbol: ClassVar[str]
    grand_parameter: ClassVar[float]
    prior_parameter: ClassVar[float]
    max_calls: int

    @abstractmethod
    def solve(self, sampler: RewardSampler, targets, grand: Evaluation, releases, parties) -> list[Search]:
        """One finished `Search` per target, in order: parties[j] (an index into `releases`) is searched for
        targets[j], given the grand coalition's evaluation `grand` (at grand_parameter)."""

    @abstractmethod
    def effective_epsilons(self, releases, parameters) -> np.ndarray:
        """(n rewards, n parties): party k's epsilon inside party i's reward at parameters[i]."""


@dataclass(frozen=True)
class _SearchSettings(RewardMechanism):
    """What both searches take: max_calls sampler calls per party at most; accept |r - r*| <= z * se; stop when the
    bracket is narrower than parameter_tolerance times its upper end."""

    max_calls: int = 10
    z: float = 2.0
    parameter_tolerance: float = 1e-3

    def __post_init__(self) -> None:
        kind = type(self).__name__
        object.__setattr__(self, "max_calls", check_count(f"{kind}.max_calls", self.max_calls, minimum=1))
        object.__setattr__(self, "z", check_positive(f"{kind}.z", self.z))
        tolerance = check_positive(f"{kind}.parameter_tolerance", self.parameter_tolerance)
        object.__setattr__(self, "parameter_tolerance", tolerance)


@dataclass(frozen=True)
class Tempering(_SearchSettings):
    """Likelihood tempering: q_i = p(theta | kappa c, kappa o, kappa Z) with kappa in [0, 1] (Sim et al. 2023, Sec.
    5.2, App. E.3), the power posterior p(theta) p(D_N | theta)^kappa for exponential families. r(kappa) runs from 0
    (the prior) to v_N (the grand coalition) and is monotone in the exact-statistics conjugate case (App. E.2), so
    every target in [0, v_N] has one root; trials are shared across parties, since r(kappa) is the same function
    for all of them. Every other party keeps its own guarantee in the reward (post-processing).

    max_calls: sampler calls per party at most; z: accept |r - r*| <= z * se; parameter_tolerance: stop when the
    bracket on kappa is narrower than this fraction of its upper end.
    """

    name = "tempering"
    symbol = "kappa"
    grand_parameter = 1.0
    prior_parameter = 0.0

    def solve(self, sampler: RewardSampler, targets, grand: Evaluation, releases=None, parties=None) -> list[Search]:
        """Each party's kappa for its target, given the grand coalition's evaluation (kappa = 1). The releases and
        parties are not needed: every party searches the same r(kappa)."""
        shared = [Evaluation(self.prior_parameter, 0.0, 0.0, None), grand._replace(parameter=self.grand_parameter)]
        searches = [Search(float(target), shared, increasing=True) for target in targets]
        _lockstep(self, sampler, searches, lambda search, kappa: sampler.data.tempered(kappa))
        return searches

    def effective_epsilons(self, releases, parameters) -> np.ndarray:
        """(n rewards, n parties): party k's epsilon inside party i's reward, its own (post-processing)."""
        own = np.array([r.release.guarantee.epsilon for r in releases])
        return np.tile(own, (len(parameters), 1))


@dataclass(frozen=True)
class NoiseAddition(_SearchSettings):
    """Noise addition: q_i = p(theta | t^i_N) with t^i_k = o_k + (0.5 lambda Delta_k^2 tau)^(1/2) e^i_k and the noise
    law widened to match (Sim et al. 2023, Sec. 5.1, App. E.3), one fixed realisation e^i per party i, drawn as
    privacy noise (OS entropy unless `noise_seed`), so party i cannot subtract it. The smallest root in tau is found
    by scanning tau upward (x4 from the tau that doubles the smallest release's noise variance) to the first trial
    below r*, then regula falsi in log tau; r(tau) need not be monotone (Fig. 2d), and a warning says so when the
    trials show it. Party k's guarantee in the reward improves to the accountant's epsilon at the widened noise
    ((lambda, eps_k / (1 + tau eps_k))-RDP for a Renyi release).
    """

    noise_seed: int | None = None
    allow_seed_reuse: bool = False

    name = "noise addition"
    symbol = "tau"
    grand_parameter = 0.0
    prior_parameter = math.inf

    def __post_init__(self) -> None:
        super().__post_init__()
        NoiseSource(self.noise_seed, allow_reuse=self.allow_seed_reuse)  # checks the seed

    @staticmethod
    def unit_variances(releases) -> np.ndarray:
        """0.5 lambda Delta_k^2 per party: the added noise variance per unit tau (lambda: the release's Renyi order;
        Delta_k the sensitivity its noise is calibrated to, `Release.calibrated_sensitivity`)."""
        return np.array([0.5 * r.release.guarantee.rdp_order * r.release.calibrated_sensitivity**2 for r in releases])

    def realisations(self, releases, shape) -> list[jax.Array]:
        """One standard-normal draw e^i (n, P) per rewarded party i, from privacy-noise keys."""
        source = NoiseSource(self.noise_seed, allow_reuse=self.allow_seed_reuse)
        identity = [r.release.release_id for r in releases]
        return [
            add_noise(source.key(fingerprint("reward noise", i, *identity)), jnp.zeros(shape), 1.0)
            for i in range(len(releases))
        ]

    @staticmethod
    def inputs(data: NoiseAwareData, unit_variances: np.ndarray, draw: jax.Array, tau: float) -> NoiseAwareData:
        added = jnp.asarray(unit_variances * tau)
        return NoiseAwareData(
            data.perturbed + jnp.sqrt(added)[:, None] * draw,
            data.counts,
            jnp.sqrt(jnp.square(data.noise_std) + added),
        )

    def solve(self, sampler: RewardSampler, targets, grand: Evaluation, releases, parties) -> list[Search]:
        """The smallest tau of each of `parties` (indices) for its target, given the grand coalition (tau = 0)."""
        unit = self.unit_variances(releases)
        draws = self.realisations(releases, sampler.data.perturbed.shape)
        start = grand._replace(parameter=self.grand_parameter)
        searches = [Search(float(target), [start], increasing=False) for target in targets]
        realisation = {id(search): draws[party] for search, party in zip(searches, parties)}
        _lockstep(
            self,
            sampler,
            searches,
            lambda search, tau: self.inputs(sampler.data, unit, realisation[id(search)], tau),
            scan_start=float(np.min(np.square(np.asarray(sampler.data.noise_std)) / unit)),
        )
        for party, search in zip(parties, searches):
            self._warn_if_not_monotone(search, releases[party].owner)
        return searches

    def _warn_if_not_monotone(self, search: Search, party: int) -> None:
        ordered = sorted(search.trials, key=lambda t: t.parameter)
        for j, earlier in enumerate(ordered):
            for later in ordered[j + 1 :]:
                if later.value - earlier.value > self.z * math.hypot(later.stderr, earlier.stderr):
                    warnings.warn(
                        f"{party}'s reward r(tau) is not monotone for its noise realisation: r = "
                        f"{earlier.value:.3f} at tau = {earlier.parameter:.3g} but {later.value:.3f} at tau = "
                        f"{later.parameter:.3g} (Sim et al. 2023, Fig. 2d); the root found may not be the smallest. "
                        "Likelihood tempering is monotone",
                        stacklevel=user_stacklevel(),
                    )
                    return

    def effective_epsilons(self, releases, parameters) -> np.ndarray:
        """(n rewards, n parties): party k's epsilon inside party i's reward at tau_i, by the accountant of its
        release at the widened noise (eps_k / (1 + tau_i eps_k) for a Renyi release)."""
        unit = self.unit_variances(releases)
        table = np.zeros((len(parameters), len(releases)))
        for i, tau in enumerate(parameters):
            for k, released in enumerate(releases):
                record = released.release
                if not np.isfinite(tau):  # the prior: nothing of party k is left in it
                    continue
                widened = math.sqrt(record.noise_scale**2 + unit[k] * tau)
                event = _widened_event(record, widened)
                guarantee = record.guarantee
                table[i, k] = (
                    rdp_epsilon_at(event, guarantee.rdp_order)
                    if guarantee.is_rdp
                    else epsilon_at(event, guarantee.delta)[0]
                )
        return table


def _widened_event(record, widened: float):
    """The event of a release whose noise std is widened to `widened` by added Gaussian noise.

    Float Gaussian: the Gaussian event at widened / sensitivity. Discrete Gaussian: its zCDP event at widened /
    (sensitivity + grid sqrt(d)), the rounded statistic's sensitivity, treating N_Z(0, sigma^2) + N(0, s^2) as a
    Gaussian of variance sigma^2 + s^2 (at the default grid sigma is over 1000 grid steps, where the two agree
    closely); at no added noise it is the release's own event."""
    if record.noise == "discrete_gaussian":
        return zcdp_event(widened / record.calibrated_sensitivity)
    return gaussian_event(widened / record.sensitivity)


MECHANISMS = {"tempering": Tempering, "noise": NoiseAddition}
PARAMETER_SYMBOLS = {mechanism.name: mechanism.symbol for mechanism in MECHANISMS.values()}  # 'tempering': 'kappa'


def as_mechanism(rewards) -> RewardMechanism:
    """'tempering', 'noise', or a configured Tempering / NoiseAddition (any `RewardMechanism`)."""
    if isinstance(rewards, RewardMechanism):
        return rewards
    if isinstance(rewards, str) and rewards in MECHANISMS:
        return MECHANISMS[rewards]()
    raise ValueError(
        f"rewards must be 'tempering', 'noise', bayesval.rewards.Tempering(...) or NoiseAddition(...), got {rewards!r}"
    )
