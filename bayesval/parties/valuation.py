"""The party path of `bayesval.valuate`: value the parties of a private collaboration (Sim et al. 2023,
Algorithm 2, lines 1-14) and, if asked, reward them (lines 15-31).

One function per job, called in this order by `value_parties`:

1. `party_settings`: the keyword arguments, defaulted and checked, as one frozen `PartyValuationSettings`.
2. `check_valuation`: the parties and the model checked once (`check_parties`, the model's own `check`, the
   memory limit and the KL estimator on placeholder data of the releases' shapes), then the resume source.
   Everything is checked before any release, compilation or sampling.
3. `release_parties`: each raw `Party` releases once through its mechanism (a party that released the model's
   statistic before hands out that release), and every release of the valued owners goes in one ledger.
4. `CoalitionSurprise`: the coalition game v_C = KL(p(theta | o_C) || p(theta)), resumed from a result of the same
   game (`bayesval.results.state.CoalitionEstimates`) where one is given.
5. `shapley_values`: exact over all 2^n coalitions up to `exact_up_to` parties, else permutation sampling
   (`bayesval.games.semivalue`; with `control_variate`, against the model's surrogate game as a control variate)
   until the stopping rule holds or every coalition is known, each coalition valued
   with the budget of a sampled game (`PartyValuationSettings.for_parties`, `SamplerConfig.for_sampled_game`;
   not where the parties are also rewarded).
6. `reward_parties`: rho-Shapley rewards by tempering or noise addition (Sim et al. 2023, Sec. 5).
7. `assemble_result`: the `ValuationResult`, with the coalition estimates as its typed resume state.

The design, the defaults and the resume contract are described in docs/api/valuate.md and docs/architecture.md.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from bayesval import progress
from bayesval.games.control import ControlVariate, EstimatedControl, Surrogate, SurrogateLevels
from bayesval.games.multifidelity import estimated_control
from bayesval.games.samplers import PermutationSampler
from bayesval.games.semivalues import semivalue
from bayesval.games.shapley import coalition_masks, exact_shapley_per_repeat
from bayesval.games.stopping import MaxEvaluations, StandardError, StoppingRule, When, capped, smallest_threshold
from bayesval.games.utilities import KeylessUtility
from bayesval.games.weights import SHAPLEY
from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import ESS_THRESHOLD, R_HAT_THRESHOLD
from bayesval.models.protocol import capabilities, check_party_model
from bayesval.parties.boundary import (
    PerturbedStatistic,
    check_distinct_releases,
    check_same_columns,
    describe_statistic,
)
from bayesval.parties.importance import ROUTES
from bayesval.parties.keys import control_key, rewards_key
from bayesval.parties.party import Party
from bayesval.parties.rewards.allocation import Rewards, allocate
from bayesval.parties.rewards.control import NoiseAddition, Tempering, as_mechanism
from bayesval.parties.rewards.sampling import RewardSampler
from bayesval.parties.rewards.targets import UndefinedTargets, check_rho
from bayesval.parties.surprise import (
    UNFINGERPRINTED,
    CoalitionSurprise,
    batch_rows,
    conjugate_prior,
    game_fingerprint,
    kernel_settings_that_run,
    per_repeat,
    prior_density,
    start_that_runs,
)
from bayesval.privacy import PrivacyLedger
from bayesval.results.result import ValuationResult
from bayesval.results.variance import TRUSTED_DOF
from bayesval.statistics import Bounds
from bayesval.validation import check_bool, check_int, check_key, check_positive, user_stacklevel

SURROGATE = "the model's surrogate"  # the control variate's name in results, where the surrogate gives none
# An estimated control's name, which a resumed run must share (`bayesval.games.semivalues`): it says how many cheaper
# levels the surrogate has (`_estimated_name`); a change of bayesval that moves the surrogate's values otherwise must
# change it too, as the levels' fallback on failed fits did (2026-11-29) and the party product in the Laplace fits'
# place did (2026-12-01: "the model's surrogate of the coalitions sampled" before).
ESTIMATED_SURROGATE = "the model's surrogate of the coalitions sampled (without fits)"
DEFAULT_K = 4  # neighbours of the k-NN KL estimator
DEFAULT_EXACT_UP_TO = 10  # parties valued by enumerating all 2^n coalitions
DEFAULT_TOLERANCE = 0.05  # the default stopping rule's standard error, in nats
# A coalition whose surprise is within this many standard errors of 0 is reported as indistinguishable from the prior.
PRIOR_LIKE_STDERRS = 2.0
DEFAULT_RHO = 0.2  # the reward targets' rho (Sim et al. 2023, Sec. 6)
# The default rule stops once every standard error is at most the tolerance and trusted (`StandardError`: at least
# TRUSTED_DOF degrees of freedom, bayesval.results.variance), with no floor of permutations of its own (64 until
# 2026-11-28; docs/benchmarks.md, "A stopping rule that stops on time").
# Parties sampled in Latin blocks: two blocks, the fewest that give a position a variance, fit in one batch of
# PERMUTATION_BATCH (docs/games.md, "Latin permutations"; 32 until 2026-11-30, when two blocks were <= 64).
LATIN_UP_TO = 16
MAX_PERMUTATIONS = 10_000  # the default rule's cap, as MaxEvaluations(MAX_PERMUTATIONS * (n + 1))
# An enumerated game given a tolerance adds repeats until its standard errors meet it, at most this many in all.
MAX_EXACT_REPEATS = 96
PERMUTATION_BATCH = 32  # permutations per batch of coalition posteriors, rounded to whole Latin blocks
SEQUENTIAL_BATCH = 8  # permutations a batch where coalitions are valued one after another: the rule's step
PREFIXES = 3  # beyond LATIN_UP_TO, permutations cut after a third of the parties beside each whole one
MAX_CONTROL_PARTIES = 12  # the most parties whose surrogate is fitted on every coalition (4,095 fits in 142 s)
# Beyond, phi(u) is estimated from evaluations of the surrogate (`estimated_control`) to this share of the tolerance
# (its variance, a ninth of the tolerance's square, adds to the sampled difference's), with at most this many fits.
SURROGATE_SHARE = 1 / 3
MAX_SURROGATE_EVALUATIONS = 20_000


def permutation_sampler(
    num_parties: int, resumed: str | None = None, vectorised: bool = True
) -> tuple[PermutationSampler, int | None]:
    """The permutation sampler and its whole permutations per batch. Latin blocks (`PermutationSampler(latin=True)`:
    each party at every position once a block, its marginals averaged by position) up to LATIN_UP_TO = 16 parties,
    where two blocks, the fewest that give each position's marginals a variance, fit in one batch of
    PERMUTATION_BATCH; beyond, prefixed permutations (`PermutationSampler(prefixes=PREFIXES)`: beside each whole
    permutation PREFIXES more cut after a third of the parties, a party's draws averaged by position group: first,
    early, late, last). Against the control variate a party's marginals of v - u hardly change in the mean with the
    position, so two Latin blocks are a floor the variance does not ask for, but they spread most where the coalition
    is small (at 24 Syn parties 0.22 at positions 1-4 against 0.06 at 17-23): the cut permutations value only those
    positions, in the narrowest and cheapest rows, and a party's early and late draws no longer mix into one
    heavy-tailed sample whose degrees of freedom keep the rule from trusting it. On a replayed 24-party game with the
    party product's measured error, 12 keys, tolerance 0.03, the rows' cost to stop was a median 334 s (300-502)
    against 816 s (401-1,495) for plain permutations, as calibrated (docs/benchmarks.md, "Prefixed permutations
    beyond 16 parties"). A game whose coalitions are valued in `vectorised` sampler calls (the chains: a larger call
    costs less a coalition) takes batches of PERMUTATION_BATCH permutations in all, rounded to whole blocks; one that
    values them one after another (importance sampling) takes the stopping rule's finest step: one Latin block, or
    SEQUENTIAL_BATCH permutations in all (2 whole and 6 cut), a batch (on a replayed 12-party game the rule stopped
    after 24 to 48 permutations where batches of 36 sometimes went on to 72: docs/importance.md, "When it runs"). A
    resumed run (`resumed`: its sampler's name) goes on with the sampler it was sampled with (plain permutations
    for a run beyond 16 parties saved before the prefixes), in the batches of its saved state (None here)."""
    plain, latin = PermutationSampler(), PermutationSampler(latin=True)
    prefixed = PermutationSampler(prefixes=PREFIXES) if PREFIXES else plain
    if resumed is not None:
        return next((sampler for sampler in (latin, prefixed) if sampler.name == resumed), plain), None
    if num_parties > LATIN_UP_TO:
        return prefixed, (PERMUTATION_BATCH if vectorised else SEQUENTIAL_BATCH) // (1 + PREFIXES)
    blocks = max(1, round(PERMUTATION_BATCH / num_parties)) if vectorised else 1
    return latin, num_parties * blocks


@dataclass(frozen=True)
class PartyValuationSettings:
    """The keyword arguments of a party valuation, defaulted and checked (`party_settings`).

    key          the sampling key (privacy noise never comes from it)
    config       the model's sampler settings, with the progress bar as asked
    k, kl        the KL estimator's neighbours and kind ('auto', 'prior-density', 'two-sample', 'rao-blackwell')
    exact_up_to  the largest party count valued exactly
    stop         the stopping rule of permutation sampling, capped (None: `stopping_rule`'s default)
    tolerance    the default stopping rule's standard error (where `stop` is given without one, its smallest
                 `StandardError` threshold: an estimated control is held to it)
    exact_tolerance  the tolerance as asked (None where not): an enumerated game adds repeats until every standard
                 error meets it, trusted (`repeats_to_tolerance`); without it, it keeps the config's repeats
    keep_draws   whether the result keeps every coalition's posterior draws
    mechanism    the reward mechanism (None: no rewards), with the targets' rho
    control_variate  whether sampled Shapley values use the model's surrogate as a control variate: None (the
                 default) wherever it can be had, True the same with a warning where it cannot, False never
                 (docs/games.md, "Control variates")
    surprise     how coalition posteriors are drawn: 'auto', 'importance' or 'mcmc' (docs/importance.md)
    """

    key: jax.Array
    config: SamplerConfig
    k: int
    kl: str
    exact_up_to: int
    tolerance: float
    stop: StoppingRule | None
    keep_draws: bool
    mechanism: Tempering | NoiseAddition | None
    rho: float
    control_variate: bool | None = None
    surprise: str = "auto"
    exact_tolerance: float | None = None

    def enumerates(self, num_parties: int) -> bool:
        """Whether a game of `num_parties` parties is valued over every coalition (else by permutation sampling)."""
        return num_parties <= self.exact_up_to

    def for_parties(self, num_parties: int) -> PartyValuationSettings:
        """These settings for a game of `num_parties` parties: where its Shapley values are sampled, with the budget
        the config gives a sampled game (`SamplerConfig.for_sampled_game`: the Gibbs presets' 2 repeats a coalition),
        unless the parties are also rewarded, whose rewards' standard errors come from the repeats alone."""
        if self.enumerates(num_parties) or self.mechanism is not None:
            return self
        return replace(self, config=self.config.for_sampled_game())

    def stopping_rule(self, num_parties: int) -> StoppingRule:
        """`stop`, or the default: every stderr <= tolerance and trusted (`StandardError`: from enough degrees of
        freedom, the game layer's rule, with no floor of permutations), at most MAX_PERMUTATIONS permutations (n + 1
        coalition evaluations each)."""
        if self.stop is not None:
            return self.stop
        return StandardError(self.tolerance) | MaxEvaluations(MAX_PERMUTATIONS * (num_parties + 1))


def party_settings(
    model,
    *,
    key=None,
    config=None,
    k=None,
    kl=None,
    exact_up_to=None,
    tolerance=None,
    stop=None,
    keep_draws=None,
    progress_bar=None,
    rewards=None,
    rho=None,
    control_variate=None,
    surprise=None,
) -> PartyValuationSettings:
    """The settings of `valuate`'s keyword arguments (None: the default), each checked, in the order of the
    signature; errors name the argument."""
    key = check_key("key", 0 if key is None else key)
    config = sampler_config(model, config, progress_bar)
    k = check_neighbours(check_int("k", DEFAULT_K if k is None else k, minimum=1), config)
    exact_up_to = check_int("exact_up_to", DEFAULT_EXACT_UP_TO if exact_up_to is None else exact_up_to, minimum=1)
    exact_tolerance = None if tolerance is None else check_positive("tolerance", tolerance)
    stop = None if stop is None else capped(stop)
    # a rule's own threshold, where one is given without a tolerance, is the tolerance an estimated control is held to
    asked = None if stop is None else smallest_threshold(stop)
    tolerance = exact_tolerance or asked or DEFAULT_TOLERANCE
    if rewards is None and rho is not None:
        raise ValueError("rho sets the reward targets: pass rewards='tempering' or 'noise' with it")
    mechanism = None if rewards is None else as_mechanism(rewards)
    rho = check_rho(DEFAULT_RHO if rho is None else rho)
    keep_draws = False if keep_draws is None else check_bool("keep_draws", keep_draws)
    kl = "auto" if kl is None else kl  # checked against the model in `check_valuation`
    control_variate = None if control_variate is None else check_bool("control_variate", control_variate)
    surprise = "auto" if surprise is None else surprise
    if surprise not in ROUTES:
        raise ValueError(f"surprise must be one of {ROUTES}, got {surprise!r}")
    return PartyValuationSettings(
        key,
        config,
        k,
        kl,
        exact_up_to,
        tolerance,
        stop,
        keep_draws,
        mechanism,
        rho,
        control_variate,
        surprise,
        exact_tolerance,
    )


def check_neighbours(k: int, config: SamplerConfig, game: str = "") -> int:
    """k, where a repeat of every coalition posterior keeps more than k draws under `config`, chains started cold or
    warm (`warm_samples` draws a chain); else a ValueError naming the fewest (`game` says whose budget it is)."""
    fewest = min(config.for_start(warm).draws_per_repeat for warm in (False, True))
    if k >= fewest:
        raise ValueError(
            f"k={k} neighbours need more than k posterior draws per repeat; the sampler config gives {fewest}{game}"
        )
    return k


def sampler_config(model, config, progress_bar: bool | None) -> SamplerConfig:
    """A `SamplerConfig`, or a preset name of the model's sampler ('fast', the default, or 'paper'), with the
    progress bar as asked (None: as the config says)."""
    if config is None:
        config = "fast"
    if isinstance(config, str):
        config = SamplerConfig.preset(config, model.sampler)
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"config must be a SamplerConfig or a preset name ('fast', 'paper'), got {config!r}")
    return config if progress_bar is None else config.with_(progress_bar=progress_bar)


def check_valuation(model, parties, settings: PartyValuationSettings, resume_from) -> list[str]:
    """The parties' names, after every check that needs the parties (once each), on placeholder data of the
    releases' shapes: nothing is released, compiled or sampled here."""
    names = check_parties(model, parties)
    placeholder = _placeholder_data(model, parties)
    caps = capabilities(model)
    if caps.check is not None:
        caps.check(placeholder)
    if settings.kl != "auto":  # the estimator asked for is available
        prior_density(caps, model.name, placeholder, settings.kl)
        conjugate_prior(caps, model.name, placeholder, settings.kl)
    batch_rows(model, placeholder, settings.config, 1, settings.kl, caps=caps)  # memory_limit_mb fits one posterior
    if not settings.enumerates(len(names)):
        sampled = settings.for_parties(len(names)).config
        check_neighbours(settings.k, sampled, f" where its {len(names)} parties' game is sampled (sampled_chains)")
    if settings.exact_tolerance is not None and settings.enumerates(len(names)) and settings.surprise == "importance":
        raise ValueError(
            f"tolerance on an enumerated game ({len(names)} parties, exact_up_to={settings.exact_up_to}) adds "
            "repeats of every coalition by the chains, and surprise='importance' takes none: pass surprise='auto' "
            "or 'mcmc' with it, or no tolerance"
        )
    _check_resume_source(resume_from, names, settings)
    return names


def _check_resume_source(resume_from, names: list[str], settings: PartyValuationSettings) -> None:
    """`resume_from` is None or the result of an earlier valuation of these parties, with its coalition estimates
    (whether it is the same game is known once the releases are: `resume`), and a permutation run sampled against a
    control variate is resumed with it."""
    if resume_from is None:
        return
    if settings.keep_draws:
        raise ValueError(
            "keep_draws=True cannot resume an earlier valuation: the draws of the coalitions it sampled were not "
            "kept; run the valuation again with keep_draws=True"
        )
    if not (isinstance(resume_from, ValuationResult) and resume_from.coalition_estimates is not None):
        got = repr(resume_from.method) if isinstance(resume_from, ValuationResult) else type(resume_from).__name__
        raise TypeError(
            f"resume_from must be the ValuationResult of an earlier party valuation (saved and loaded too), got {got}"
        )
    if resume_from.coalition_estimates.diagnostics is None:
        raise ValueError(
            "resume_from's coalition estimates carry no coalition diagnostics (a CoalitionEstimates built without "
            "them, or loaded from a result whose diagnostics lost them): value the parties again without resume_from"
        )
    if list(resume_from.names) != names:
        raise ValueError(
            f"resume_from is a result of a different game: its parties are {list(resume_from.names)}, these {names}"
        )
    sampled_against = resume_from.state is not None and resume_from.state.control_table is not None
    if settings.control_variate is False and sampled_against:
        raise ValueError(
            "resume_from was sampled against a control variate, and its draws are differences from that surrogate: "
            "resume it without control_variate=False (the surrogate saved with it is used, not fitted again)"
        )


def check_parties(model, parties) -> list[str]:
    """The parties' names, after checking they are 2+ parties / releases with unique names that fit together
    and fit the model (nothing is released here)."""
    if (
        isinstance(parties, (Party, PerturbedStatistic))
        or not isinstance(parties, Sequence)
        or isinstance(parties, str)
    ):
        raise TypeError(
            "parties must be a list of bayesval.Party or PerturbedStatistic objects (training data (X, y) is for "
            f"data-point estimators), got {type(parties).__name__}"
        )
    if len(parties) < 2:
        raise ValueError(f"valuation needs at least 2 parties, got {len(parties)}")
    for index, party in enumerate(parties):
        if not isinstance(party, (Party, PerturbedStatistic)):
            raise TypeError(
                f"parties[{index}] must be a bayesval.Party or PerturbedStatistic, got {type(party).__name__}"
            )
    names = [p.name if isinstance(p, Party) else p.owner for p in parties]
    if len(set(names)) < len(names):
        files = [
            p.source_file.path
            for p, name in zip(parties, names)
            if names.count(name) > 1 and getattr(p, "source_file", None) is not None and p.source_file.path
        ]
        raise ValueError(f"party names must be unique, got {names}" + (f" (release files {files})" if files else ""))
    check_distinct_releases([p for p in parties if isinstance(p, PerturbedStatistic)])
    check_same_columns([p for p in parties if isinstance(p, PerturbedStatistic)])
    widths = {name: _width(p) for name, p in zip(names, parties)}
    if len(set(widths.values())) > 1:
        raise ValueError(f"parties disagree on the number of features / statistic length: {widths}")
    for party in parties:
        if isinstance(party, PerturbedStatistic):
            _check_release_fits(model, party)
    return names


def release_all(model, parties) -> list[PerturbedStatistic]:
    """Check the parties (`check_parties`) and release every raw `Party` through its mechanism, once: a party
    that released the model's statistic before hands out that same release."""
    check_parties(model, parties)
    return release_checked(model, parties)


def release_checked(model, parties) -> list[PerturbedStatistic]:
    """`release_all` of parties already checked by `check_parties`."""
    return [p.release(model.statistic(p.num_features)) if isinstance(p, Party) else p for p in parties]


class Releases(NamedTuple):
    """What the mediator holds after the releases: each party's release, the model's input of them, every release
    of the valued owners as a ledger (earlier ones compose with these), and each release's provenance ('new',
    'reused' or 'released before this call')."""

    statistics: list[PerturbedStatistic]
    data: NoiseAwareData
    privacy: PrivacyLedger
    provenance: dict[str, str]


def release_parties(model, parties, ledger: PrivacyLedger | None) -> Releases:
    """Release the checked parties, after warning of releases that are experiments or reused; every release of the
    valued owners is recorded once in `ledger` too, when one is carried across calls."""
    provenance = _provenance(model, parties)
    _warn_about_releases(parties, provenance)
    statistics = release_checked(model, parties)
    privacy = PrivacyLedger()
    for party in parties:
        if isinstance(party, Party):
            privacy.merge(party.ledger)
        else:
            privacy.record(party.release)
    if ledger is not None:
        ledger.merge(privacy)
    return Releases(statistics, NoiseAwareData.from_releases(statistics), privacy, provenance)


def _warn_about_releases(parties, provenance: dict[str, str]) -> None:
    flagged = {p.owner: p.caveats for p in parties if isinstance(p, PerturbedStatistic) and p.caveats}
    if flagged:
        described = "; ".join(f"{owner}: {', '.join(notes)}" for owner, notes in flagged.items())
        warnings.warn(
            f"some releases are experiments or not floating-point safe ({described})", stacklevel=user_stacklevel()
        )
    unverified = {
        p.owner: p.source_file.status
        for p in parties
        if isinstance(p, PerturbedStatistic) and p.source_file is not None and p.source_file.verified_key is None
    }
    if unverified:
        described = ", ".join(f"{owner} ({how})" for owner, how in unverified.items())
        warnings.warn(
            f"the release files of {described} are not verified against their parties' public keys: a checksum "
            "catches accidental damage, not a deliberate edit (sign: save(path, signing_key=...) or bayesval release "
            "--sign; verify: PerturbedStatistic.load(path, verify_with=...) or bayesval valuate --verify; "
            "docs/privacy.md)",
            stacklevel=user_stacklevel(),
        )
    declared = {p.name if isinstance(p, Party) else p.owner: p.bounds for p in parties if p.bounds is not None}
    if len(set(declared.values())) > 1:
        described = "; ".join(f"{owner}: {_described(bounds)}" for owner, bounds in declared.items())
        warnings.warn(
            f"the parties declared different bounds ({described}): each clipped its rows to its own, so their "
            "statistics describe differently clipped data; agree on one set before the releases "
            "(docs/own_data.md, section 2)",
            stacklevel=user_stacklevel(),
        )
    reused = [name for name, how in provenance.items() if how == "reused"]
    if reused:
        warnings.warn(
            f"reusing the earlier releases of {reused}: no new privacy spent (party.release(statistic, fresh=True) "
            "makes a new release, which composes in the ledger)",
            stacklevel=user_stacklevel(),
        )


def _described(bounds: Bounds) -> str:
    """Bounds as the command line declares them: X_NORM, or X_NORM,Y_ABS."""
    return f"{bounds.x_norm:g}" + ("" if bounds.y_abs is None else f",{bounds.y_abs:g}")


def coalition_game(model, releases: Releases, settings: PartyValuationSettings, key) -> CoalitionSurprise:
    """The coalitions' surprise: nothing sampled yet (`resume_game` files an earlier valuation's)."""
    n = len(releases.statistics)
    return CoalitionSurprise(
        model,
        releases.data,
        settings.config,
        settings.k,
        key,
        max_coalitions=2**n - 1,
        kl=settings.kl,
        keep_draws=settings.keep_draws,
        pooled_draws_of=() if settings.mechanism is None else [2**n - 1] + [1 << i for i in range(n)],
        surprise=settings.surprise,
        sampled=not settings.enumerates(n),
    )


def resume_game(surprise: CoalitionSurprise, resume_from: ValuationResult | None) -> ValuationResult | None:
    """Take over the coalition estimates of `resume_from` (a result of the game `surprise` values: same model,
    releases, sampler settings, k, KL estimator and route, whatever its key), and give it back fingerprinted as
    this game is today, for the Shapley values' resume; refused, naming what differs, where it is of another game.
    A result saved before the memory limit left the fingerprint (`game_fingerprint`) carries the fingerprint with
    the limit it ran under: it is of this game where that fingerprint is this game's with the same limit, and its
    coalition estimates and its permutations' state take today's."""
    if resume_from is None:
        return None
    saved, today = resume_from.coalition_estimates.game, surprise.fingerprint
    if saved != today:
        limit = resume_from.diagnostics.get("sampler", {}).get("memory_limit_mb")
        if limit is None or saved != game_fingerprint(surprise.game, limit):
            raise ValueError(
                "resume_from is a result of a different game: its model, releases, parties, sampler settings, k, "
                "KL estimator or route differ from this valuation's"
                + _sampler_differences(resume_from.diagnostics, sampler_record(surprise))
                + _route_difference(resume_from.diagnostics, surprise.game.route)
            )
        state = resume_from.state
        if state is not None and state.game is not None and state.game.get("id") == party_game_id(saved):
            state = replace(state, game=state.game | {"id": party_game_id(today)})
        estimates = replace(resume_from.coalition_estimates, game=today)
        resume_from = replace(resume_from, coalition_estimates=estimates, state=state)
    surprise.restore(resume_from.coalition_estimates)
    return resume_from


def party_game_id(fingerprint: str) -> str:
    """The game layer's id of a party game (`semivalue(game_id=...)`) of this fingerprint (`game_fingerprint`)."""
    return f"party game {fingerprint}"


def _route_difference(diagnostics: dict, route: str) -> str:
    """Where a saved result's coalition posteriors took another route than this valuation's (`route`: 'importance'
    or 'mcmc'; a result records `diagnostics["route"]` where it took importance sampling), the `surprise=` that
    resumes it, for an error ('' where the routes agree)."""
    saved = "importance" if "route" in diagnostics else "mcmc"
    if saved == route:
        return ""
    if saved == "mcmc":
        return (
            "; resume_from's coalition posteriors were sampled by MCMC chains and this valuation's take importance "
            "sampling (surprise='auto' does where the coalitions are sampled, since 2026-11-29): pass "
            "surprise='mcmc' to resume it"
        )
    return "; resume_from's coalition posteriors took importance sampling: pass surprise='importance' to resume it"


def _sampler_differences(diagnostics: dict, today: dict) -> str:
    """The sampler settings in which a saved result's game differs from one valued with the settings `today`
    (`sampler_record`), for an error ('' if none), with the config that resumes it where only the repeats differ
    (the Gibbs presets value a coalition twice where the Shapley values are sampled, unless the parties are also
    rewarded: `PartyValuationSettings.for_parties`)."""
    saved = diagnostics.get("sampler", {})
    differing = {
        name: (saved[name], value)
        for name, value in today.items()
        if name in saved and name not in UNFINGERPRINTED and saved[name] != value
    }
    listed = "; ".join(
        f"{name} {there!r} in resume_from, {here!r} in this valuation" for name, (there, here) in differing.items()
    )
    if list(differing) != ["num_repeats"]:
        return f": {listed}" if differing else ""
    repeats = differing["num_repeats"][0]
    return f": {listed} (config=...with_(num_repeats={repeats}) resumes a result of {repeats} repeats)"


def sampler_record(surprise: CoalitionSurprise) -> dict:
    """The sampler settings a result records (`diagnostics["sampler"]`): the config's fields, with the kernel
    settings as the run used them where the model owns a NUTS kernel (`kernel_settings_that_run`: a
    `LogisticRegression` run at the fast preset records its own target_accept_prob 0.65, not the config's 0.8 that
    it never read), and how NUTS chains start (`start_that_runs`)."""
    return (
        vars(surprise.config)
        | kernel_settings_that_run(surprise.capabilities, surprise.data, surprise.config)
        | start_that_runs(surprise.capabilities, surprise.data, surprise.config)
    )


class CoalitionGame(Protocol):
    """What the Shapley policy (`shapley_values`) reads of a coalition game: the party route's `CoalitionSurprise`,
    or any game of its interface, such as a table of coalition values replayed with their own Monte Carlo noise
    (`bayesval.parties.replay.ReplayedGame`), valued by the same policy without a posterior sampled.

    __call__(masks)     the (R, B) estimates of the coalitions masks (B, n), each coalition's cached: the same
                        estimates whenever it is asked for again (0 for the empty coalition)
    values              each coalition valued so far (its code, sum_i mask_i 2^i) -> its (R,) estimates
    num_sampled         the non-empty coalitions valued so far
    fingerprint         the game's identity, kept in the result (a resumed run must be of the same game)
    kl_estimator        how the estimates were made: 'two-sample' where coalitions' errors correlate (common random
                        numbers), anything else where they are independent (`independent_estimates`)
    vectorised          whether it values a batch's coalitions together in vectorised sampler calls, where a larger
                        batch costs less a coalition (the batch size follows: `permutation_sampler`)
    sampler_calls(sizes)  the sampler calls valuing coalitions of these sizes takes (for progress bars)
    add_repeats(count)  `count` more estimates of every coalition valued so far, and of those valued later (an
                        enumerated game given a tolerance: `repeats_to_tolerance`)
    """

    fingerprint: str
    kl_estimator: str
    values: dict[int, np.ndarray]
    vectorised: bool

    def __call__(self, masks: np.ndarray) -> np.ndarray: ...

    @property
    def num_sampled(self) -> int: ...

    def sampler_calls(self, sizes) -> int: ...

    def add_repeats(self, count: int) -> None: ...


class Surrogates(NamedTuple):
    """Where a sampled game's control variate comes from (docs/games.md, "Control variates"), each None where the
    game has none: `table()`, the surrogate of every coalition at once (an object whose `values` are its 2^n values
    in code order, with an optional `name`; None where it gives none here), and `of_coalitions()`, the surrogate of
    given coalitions (masks (B, n) -> `SurrogateValues`, or None), for more than MAX_CONTROL_PARTIES parties.
    `owner` names them in warnings and errors."""

    owner: str
    table: Callable[[], object] | None = None
    of_coalitions: Callable[[], Surrogate | None] | None = None


def model_surrogates(surprise: CoalitionSurprise) -> Surrogates:
    """The party model's surrogates of the coalition surprise (`surrogate_surprises` and `surrogate_game`, where it
    has them), of the surprise's releases."""
    caps = surprise.capabilities
    table, of_coalitions = (
        None if member is None else partial(member, surprise.data)
        for member in (caps.surrogate_surprises, caps.surrogate_game)
    )
    return Surrogates(type(surprise.model).__name__, table, of_coalitions)


PER_REPEAT = "the spread of the Shapley values of each repeat alone"  # exact values: the utility's error only


class ShapleyValues(NamedTuple):
    """The parties' Shapley values with standard errors, how they were found, the permutation run if any, and each
    value's verdict where one was sampled for (None for an enumerated game)."""

    values: np.ndarray
    stderr: np.ndarray
    method: str
    sampled: ValuationResult | None
    utility_error: str = PER_REPEAT  # how the standard errors hold the coalitions' own error
    converged: np.ndarray | None = None
    judged_by_repeats: dict | None = None  # a sampled game's that valued every coalition: its "dof" and "verdict"


def shapley_values(
    game: CoalitionGame,
    names: list[str],
    settings: PartyValuationSettings,
    key,
    resume_from,
    surrogates: Surrogates | None = None,
    surrogate_key=None,
) -> ShapleyValues:
    """The Shapley policy of the party route (docs/sim2023.md, "Which route runs for your parties"): exact Shapley
    values up to `exact_up_to` parties; beyond, permutation sampling from `key` until the stopping rule holds or every
    coalition is known (then the exact values cost nothing more). Up to 16 parties the permutations come in Latin
    blocks and a party's marginals are averaged by position (`permutation_sampler`): a party's marginal contribution
    shrinks as the coalition grows, and that spread between positions was most of a plain permutation's variance
    (docs/games.md, "Latin permutations"); beyond, prefixed permutations: against the control the marginals differ
    between positions in their spread, not their mean, and the cut ones draw the small coalitions' wide spread.
    Sampled, the game is valued against a control variate from `surrogates`
    (`surrogate_control`; phi(u) estimated from `surrogate_key`, by default split from `key`, beyond
    MAX_CONTROL_PARTIES parties). `game` is any
    `CoalitionGame`: the coalition surprise, or a replayed table of coalition values."""
    n = len(names)
    if settings.enumerates(n):
        return ShapleyValues(*_exact_shapley(game, n, settings)[:2], "exact Shapley", None)
    resumed = resume_from.state if resume_from is not None and resume_from.state is not None else None
    sampler, batch_size = permutation_sampler(n, None if resumed is None else resumed.sampler, game.vectorised)
    if surrogate_key is None:  # a stream apart from the batches' fold_in(key, batch)
        surrogate_key = jax.random.split(key)[1]
    control = surrogate_control(surrogates or Surrogates("the game"), settings, n, resumed, surrogate_key)
    sampled = semivalue(
        KeylessUtility(partial(_sampled_coalitions, game)),
        n,
        key,
        weights=SHAPLEY,
        sampler=sampler,
        stop=settings.stopping_rule(n) | When(lambda: game.num_sampled == 2**n - 1),
        batch_size=batch_size,
        names=names,
        resume_from=None if resumed is None else resume_from,
        control=control,
        independent_estimates=independent_estimates(game, resumed),
        progress_bar=settings.config.progress_bar,
        game_id=party_game_id(game.fingerprint),
    )
    count = sampled.state.batch_draws
    spent = f"{count} permutations" + (f" and {count * sampler.prefixes} prefixes" if sampler.prefixes else "")
    if game.num_sampled == 2**n - 1:
        values, stderr, repeats = _exact_shapley(game, n, settings)
        converged, verdicts = _judged_by_repeats(stderr, repeats, settings.tolerance)
        judged = {"dof": [repeats - 1] * n, "verdict": verdicts}
        method = f"exact Shapley (all coalitions sampled in {spent})"
        return ShapleyValues(values, stderr, method, sampled, converged=converged, judged_by_repeats=judged)
    method = f"permutation Shapley ({spent}{_against(control)})"
    utility_error = sampled.diagnostics["utility_error"]
    return ShapleyValues(sampled.values, sampled.stderr, method, sampled, utility_error, sampled.converged)


def _against(control: ControlVariate | EstimatedControl | None) -> str:
    """The control variate in a result's method, with the surrogate evaluations an estimated phi(u) spent."""
    if control is None:
        return ""
    if isinstance(control, EstimatedControl):
        cheaper = "" if control.below is None else f" against {control.below.evaluations} of a cheaper surrogate"
        return (
            f", {control.name} as a control variate, its Shapley values from {control.evaluations} evaluations{cheaper}"
        )
    return f", {control.name} as a control variate"


def independent_estimates(surprise: CoalitionGame, resumed) -> bool:
    """Whether the coalitions' cached estimates err independently, so that the game layer estimates their error as
    the exact semivalue's (docs/games.md, "The utility's own error"): each coalition's repeats come from its own
    chains, but the two-sample KL estimator scores every coalition of a repeat against one prior sample (common
    random numbers), which correlates their errors. A resumed run goes on as it was sampled (a result saved before
    this estimate existed goes on with the per-repeat spread)."""
    if resumed is not None:
        return resumed.noise is not None
    return surprise.kl_estimator != "two-sample"


def surrogate_control(
    surrogates: Surrogates, settings: PartyValuationSettings, n: int, resumed, key=None
) -> ControlVariate | EstimatedControl | None:
    """The control variate of a sampled party game (docs/games.md, "Control variates"), where `settings.control_variate`
    is not False: up to MAX_CONTROL_PARTIES parties the surrogate of every coalition (`surrogates.table`, the Laplace
    surprise of `LinearRegression`), its Shapley values exact; beyond, the surrogate of the coalitions sampled
    (`surrogates.of_coalitions`, the party product of `LinearRegression`) with its Shapley values estimated from `key`
    by the regression estimator to SURROGATE_SHARE of the tolerance (`estimated_control`: a multi-fidelity estimate,
    docs/games.md, "Multi-fidelity control variates"). A resumed run goes on with the control it was sampled with.
    Asked for (True) where it cannot be had (no surrogate, a run resumed that was sampled without one), a warning says
    why; by default (None) it is left out without one."""
    if settings.control_variate is False:
        return None
    asked = settings.control_variate is True
    if resumed is not None:
        return _resumed_control(surrogates, resumed, asked, settings.tolerance)
    if n > MAX_CONTROL_PARTIES:
        return _estimated_control(surrogates, settings, n, key, asked)
    if surrogates.table is None:
        _warn_no_control(asked, f"{surrogates.owner} has no surrogate_surprises")
        return None
    with progress.stage(f"valuation: the model's surrogate of {2**n - 1} coalitions (a control variate)"):
        table = surrogates.table()
    if table is None:
        _warn_no_control(asked, f"{surrogates.owner} gives no surrogate here")
        return None
    try:
        return ControlVariate(table.values, getattr(table, "name", SURROGATE))
    except (AttributeError, TypeError, ValueError) as error:
        raise ValueError(f"{surrogates.owner}.surrogate_surprises(data) gave no usable surrogate: {error}") from None


def _resumed_control(
    surrogates: Surrogates, resumed, asked: bool, tolerance: float
) -> ControlVariate | EstimatedControl | None:
    """The control a resumed run was sampled with: its saved table, or its saved estimate of phi(u) with the
    surrogate of the coalitions (fitted again: a deterministic function of the releases), with a warning where that
    estimate's standard error is not below the `tolerance` the resumed run asks for, which it then cannot meet."""
    if resumed.control_table is not None:
        return ControlVariate(resumed.control_table, SURROGATE)
    if getattr(resumed, "control_variance", None) is None:
        _warn_no_control(asked, "resume_from was sampled without one, and goes on without")
        return None
    surrogate = None if surrogates.of_coalitions is None else surrogates.of_coalitions()
    if surrogate is None:
        raise ValueError(
            f"resume_from was sampled against {surrogates.owner}'s surrogate of the coalitions (an estimated control "
            "variate), which it gives no more; resume with the model it was valued with"
        )
    saved = (resumed.control_semivalue, resumed.control_variance, resumed.control_dof)
    reached = float(np.sqrt(np.max(resumed.control_variance)))
    if not reached < tolerance:
        warnings.warn(
            f"resume_from was sampled against an estimate of the surrogate's Shapley values whose standard error, "
            f"{reached:.3g}, is part of every value's and is not below the tolerance {tolerance:g} asked now: the "
            "values cannot meet it, and the run would spend its cap; resume with a tolerance above it, or value "
            "afresh",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return EstimatedControl(surrogate, *saved, SHAPLEY.name, _estimated_name(surrogate))


def _estimated_control(surrogates: Surrogates, settings: PartyValuationSettings, n: int, key, asked: bool):
    """The multi-fidelity control beyond MAX_CONTROL_PARTIES parties (`surrogate_control`), or None with a warning
    where it was asked for and cannot be had, or where its estimate stopped at MAX_SURROGATE_EVALUATIONS with a
    standard error not below the tolerance (added to the values' own, it would keep the stop rule from holding)."""
    surrogate = None if surrogates.of_coalitions is None else surrogates.of_coalitions()
    if surrogate is None:
        has = "has no surrogate_game" if surrogates.of_coalitions is None else "gives no surrogate of coalitions here"
        _warn_no_control(asked, f"{n} parties are more than {MAX_CONTROL_PARTIES} and {surrogates.owner} {has}")
        return None
    tolerance = SURROGATE_SHARE * settings.tolerance
    label = f"valuation: the Shapley values of the model's surrogate to a standard error of {tolerance:.3g}"
    with progress.stage(label):
        control = estimated_control(
            surrogate,
            n,
            key,
            tolerance=tolerance,
            max_evaluations=MAX_SURROGATE_EVALUATIONS,
            name=_estimated_name(surrogate),
        )
    reached = float(np.sqrt(control.variances.max()))
    if not reached < settings.tolerance:  # its variance is part of every value's: the rule could never hold
        warnings.warn(
            "the Shapley values are sampled without a control variate: the Shapley values of the model's surrogate "
            f"reached a standard error of {reached:.3g} in {control.evaluations:,} evaluations, not below the "
            f"tolerance {settings.tolerance:g}, which the values' own would then never meet",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return None
    return control


def _estimated_name(surrogate) -> str:
    """The name of the estimated control of the model's `surrogate` of the coalitions: with the number of cheaper
    levels beneath it (`SurrogateLevels`), whose fallback on a coalition whose fit failed makes it another u."""
    cheaper = len(surrogate.levels) - 1 if isinstance(surrogate, SurrogateLevels) else 0
    return ESTIMATED_SURROGATE + ("" if cheaper == 0 else f", over {cheaper} cheaper level{'s' * (cheaper > 1)}")


def _warn_no_control(asked: bool, reason: str) -> None:
    if not asked:
        return
    warnings.warn(
        f"control_variate=True, but the Shapley values are sampled without a control variate: {reason}",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def _judged_by_repeats(stderr: np.ndarray, repeats: int, tolerance: float) -> tuple[np.ndarray, list[str]]:
    """The verdicts of exact Shapley values from `repeats` repeats of every coalition, as the values they judge are
    (a sampled game that valued every coalition reports these, not its permutations'): converged where the standard
    error meets the tolerance from at least TRUSTED_DOF degrees of freedom (repeats - 1: the game layer's trust)."""
    converged = (stderr <= tolerance) & (repeats - 1 >= TRUSTED_DOF)
    words = []
    for error, done in zip(stderr, converged):
        if done:
            words.append("converged")
        elif repeats - 1 < TRUSTED_DOF:
            words.append(
                f"not converged: every coalition was valued, and the standard error is the spread of {repeats} "
                f"repeats ({repeats - 1} degree{'' if repeats == 2 else 's'} of freedom, fewer than {TRUSTED_DOF:g}), "
                "a rough guess; exact_up_to= at least the number of parties with tolerance= adds repeats until it holds"
            )
        else:
            words.append(f"not converged: the standard error {error:.3g} is above the tolerance {tolerance:g}")
    return converged, words


def _exact_shapley(game: CoalitionGame, n: int, settings: PartyValuationSettings) -> tuple[np.ndarray, np.ndarray, int]:
    """Shapley values per repeat from every coalition's estimates: their mean, standard error and number of repeats,
    with repeats added until they meet `settings.exact_tolerance` where one was asked of an enumerated game
    (`repeats_to_tolerance`; a sampled game that sampled every coalition stops as it is, its verdicts from its
    repeats)."""
    pending = [code.bit_count() for code in range(1, 2**n) if code not in game.values]  # their sizes
    repeats = settings.config.num_repeats
    label = f"valuation: posteriors p(theta | o_C) of {len(pending)} coalitions x {repeats} repeats"
    masks = coalition_masks(n, include_empty=True)
    with progress.stage(label, calls=game.sampler_calls(pending)):
        per = exact_shapley_per_repeat(game(masks))
    if settings.exact_tolerance is not None and settings.enumerates(n):  # not a sampled game's every coalition
        per = repeats_to_tolerance(game, masks, per, settings.exact_tolerance, repeats)
    return *per_repeat(per), len(per)


def repeats_to_tolerance(game: CoalitionGame, masks: np.ndarray, per: np.ndarray, tolerance: float, step: int):
    """The Shapley values per repeat (repeats, n) of an enumerated game, with repeats of every coalition added
    (`game.add_repeats`, in multiples of `step`, the config's repeats) until every standard error is at most
    `tolerance` from at least TRUSTED_DOF + 1 repeats (the game layer's trust, `StandardError`: the repeats' Shapley
    values are independent, so r repeats give r - 1 degrees of freedom), or until no further `step` repeats fit
    within MAX_EXACT_REPEATS (with a warning). Each round asks for the repeats that the standard errors so far
    project, at most as many again as it has (a projection from few repeats is rough)."""
    while True:
        repeats = len(per)
        stderr = per_repeat(per)[1]
        if (stderr <= tolerance).all() and repeats - 1 >= TRUSTED_DOF:
            return per
        if repeats + step > MAX_EXACT_REPEATS:
            warnings.warn(
                f"the Shapley values' standard errors are {np.max(stderr):.3g} at most after {repeats} repeats "
                f"(no {step} more fit within MAX_EXACT_REPEATS = {MAX_EXACT_REPEATS}), not within the tolerance "
                f"{tolerance:g} from {TRUSTED_DOF:g} degrees of freedom; "
                "a larger tolerance, or more chains or sweeps a repeat (config), meets it",
                stacklevel=user_stacklevel(),
            )
            return per
        projected = max(TRUSTED_DOF + 1, math.ceil(repeats * float(np.max(stderr) / tolerance) ** 2))
        count = min(max(projected - repeats, step), repeats, MAX_EXACT_REPEATS - repeats)
        count = max(step, count // step * step)
        label = f"valuation: {count} more repeats of every coalition posterior, to a standard error of {tolerance:g}"
        sizes = masks[1:].sum(axis=1)  # the game's coalitions, every one valued (the empty one first)
        with progress.stage(label, calls=game.sampler_calls(sizes) * (count // step)):
            game.add_repeats(count)
        per = exact_shapley_per_repeat(game(masks))


def _sampled_coalitions(game: CoalitionGame, masks) -> np.ndarray:
    with progress.stage("valuation: posteriors p(theta | o_C) of the coalitions of a batch of permutations"):
        return game(np.asarray(masks))


def reward_parties(
    surprise: CoalitionSurprise, settings: PartyValuationSettings, names, releases: Releases, shapley, key
) -> Rewards | None:
    """Each party's model reward (Sim et al. 2023, Sec. 5) when a mechanism was asked for, against the surprise of
    each party alone and of the grand coalition (cached where the valuation sampled them). None, with a warning,
    where the valuation's numbers leave the targets undefined (`UndefinedTargets`): the valuation is kept."""
    if settings.mechanism is None:
        return None
    n = len(names)
    own_and_grand = np.vstack([np.eye(n, dtype=bool), np.ones((1, n), bool)])
    with progress.stage("rewards: posteriors of each party alone and of the grand coalition"):
        own_and_grand_values, own_and_grand_stderr = per_repeat(surprise(own_and_grand))
    try:
        return allocate(
            RewardSampler(surprise, key),
            settings.mechanism,
            settings.rho,
            names=names,
            releases=releases.statistics,
            shapley=shapley,
            singleton_values=own_and_grand_values[:n],
            grand=(own_and_grand_values[n], own_and_grand_stderr[n]),
        )
    except UndefinedTargets as error:
        warnings.warn(
            f"no rewards: {error}; the releases carry too little to reward, and the valuation is returned without them",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return None


def coalitions_rerun(diagnostics: dict) -> int:
    """How many coalitions of a valuation's diagnostics were sampled again (`SamplerConfig.reruns`); 0 for a result
    saved before reruns existed."""
    return sum(1 for count in diagnostics.get("reruns", []) if count)


def warn_if_unconverged(diagnostics: dict) -> None:
    """Warn when some coalition posterior missed the R-hat / ESS thresholds (`bayesval.inference.diagnostics`)."""
    if diagnostics["converged"]:
        return
    worst_r_hat, worst_ess = max(diagnostics["r_hat"]), min(diagnostics["ess"])
    rerun = coalitions_rerun(diagnostics)
    warnings.warn(
        f"some coalition posteriors did not converge (max R-hat {worst_r_hat:.3f}, min bulk ESS {worst_ess:.0f}; "
        f"wanted R-hat <= {R_HAT_THRESHOLD} and ESS >= {ESS_THRESHOLD}, or every chain dropped for low BFMI or stuck"
        + (f"; {rerun} sampled again with longer chains" if rerun else "")
        + "); see result.diagnostics and raise num_warmup / num_samples (bayesval valuate: --num-warmup / "
        "--num-samples)",
        stacklevel=user_stacklevel(),
    )


def like_the_prior(names, masks: np.ndarray, values: np.ndarray, stderr: np.ndarray) -> list[str]:
    """The coalitions whose posterior the valuation cannot tell from the prior: a surprise within
    `PRIOR_LIKE_STDERRS` standard errors of 0, or below it (a KL divergence is >= 0, so a negative estimate is 0 plus
    Monte Carlo error). Warns, naming them and the likely cause; the empty coalition is left out."""
    close = (values <= PRIOR_LIKE_STDERRS * stderr) & masks.any(axis=1)
    labels = ["{" + ", ".join(str(names[i]) for i in np.flatnonzero(mask)) + "}" for mask in masks[close]]
    if labels:
        warnings.warn(
            f"the posteriors of {len(labels)} coalition(s) cannot be told from the prior (Bayesian surprise within "
            f"{PRIOR_LIKE_STDERRS:g} standard errors of 0, or negative): {', '.join(labels)}. Their releases carry "
            "little information: bounds far above the data or too small an epsilon for the count (each party's "
            "`bayesval release` shows its signal-to-noise; docs/own_data.md); their Shapley values are noise. Listed "
            "in result.diagnostics['like_the_prior']",
            stacklevel=user_stacklevel(),
        )
    return labels


def repeats_note(config: SamplerConfig) -> str | None:
    """What the diagnostics' `num_repeats` and `sampled_repeats` mean where they differ (None where they do not): the
    first is what this game used, the second what a sampled game would (`SamplerConfig.for_sampled_game`)."""
    if config.sampled_repeats is None or config.sampled_repeats == config.num_repeats:
        return None
    return (
        f"each coalition posterior was sampled num_repeats = {config.num_repeats} times (independent runs; the "
        f"standard errors come from their spread); sampled_repeats = {config.sampled_repeats} is what a game whose "
        "coalitions are sampled rather than enumerated would use instead (SamplerConfig.for_sampled_game): not this one"
    )


def assemble_result(
    model, parties, names, surprise: CoalitionSurprise, shapley: ShapleyValues, releases: Releases, rewards
) -> ValuationResult:
    """The result: values, every sampled coalition's value, the ledger, the diagnostics and settings, and the
    coalition estimates (the typed state `resume_from` reads)."""
    n = len(names)
    estimates = surprise.estimates()
    codes = list(estimates.estimates)
    masks = ((np.array(codes)[:, None] >> np.arange(n)) & 1).astype(bool)
    mean, stderr = per_repeat(np.stack([estimates.estimates[c] for c in codes], axis=1))
    settings = {"sampler": sampler_record(surprise), "k": surprise.k, "kl_estimator": surprise.kl_estimator}
    settings["like_the_prior"] = like_the_prior(names, masks, mean, stderr)
    settings["repeats"] = surprise.filed.repeats  # each coalition's: the config's, or more where a tolerance added some
    if repeats_note(surprise.config):
        settings["repeats_note"] = repeats_note(surprise.config)
    sampled = shapley.sampled
    if sampled is not None:  # how the standard errors hold the coalitions' own error, and each party's verdict
        settings["utility_error"] = shapley.utility_error
        settings["indices"] = sampled.diagnostics["indices"] | (shapley.judged_by_repeats or {})
    return ValuationResult(
        method=f"{model.name}, Bayesian surprise, {shapley.method}",
        values=shapley.values,
        stderr=shapley.stderr,
        names=names,
        coalition_masks=masks,
        coalition_values=mean,
        coalition_stderr=stderr,
        privacy=releases.privacy,
        diagnostics=surprise.diagnostics | settings | {"releases": releases.provenance},
        counts=None if sampled is None else sampled.counts,
        converged=shapley.converged,
        state=None if sampled is None else sampled.state,
        draws=None if surprise.draws is None else np.stack([surprise.draws[c] for c in codes]),
        parameter_names=_parameter_names(model, parties),
        rewards=rewards,
        coalition_estimates=estimates,
    )


class PartyArguments(NamedTuple):
    """`valuate`'s keyword arguments that only a party valuation reads, as the caller gave them (None: the default);
    `party_settings` checks them. A data-point estimator refuses any that is given. Fields in the order of
    `valuate`'s signature, which builds them positionally."""

    key: int | jax.Array | None = None
    config: SamplerConfig | str | None = None
    k: int | None = None
    kl: str | None = None
    exact_up_to: int | None = None
    tolerance: float | None = None
    stop: StoppingRule | None = None
    keep_draws: bool | None = None
    progress_bar: bool | None = None
    rewards: str | Tempering | NoiseAddition | None = None
    rho: float | None = None
    control_variate: bool | None = None
    surprise: str | None = None


def value_parties(
    model,
    parties,
    *,
    validation=None,
    resume_from=None,
    ledger: PrivacyLedger | None = None,
    arguments: PartyArguments | None = None,
) -> ValuationResult:
    """`bayesval.valuate` of a party model: the steps of this module's docstring, in order, with `valuate`'s
    keyword arguments of a party valuation (`arguments`, checked by `party_settings`)."""
    check_party_model(model)
    if validation is not None:
        raise ValueError(
            f"validation= applies to data-point estimators; {model.name} values parties from their releases"
        )
    settings = party_settings(model, **(arguments or PartyArguments())._asdict())
    names = check_valuation(model, parties, settings, resume_from)
    settings = settings.for_parties(len(names))
    releases = release_parties(model, parties, ledger)
    key_values, key_permutations = jax.random.split(settings.key)
    surprise = coalition_game(model, releases, settings, key_values)
    resume_from = resume_game(surprise, resume_from)
    surrogates = model_surrogates(surprise)
    shapley = shapley_values(
        surprise, names, settings, key_permutations, resume_from, surrogates, control_key(settings.key)
    )
    warn_if_unconverged(surprise.diagnostics)
    key_rewards = rewards_key(settings.key)
    rewards = reward_parties(surprise, settings, names, releases, shapley.values, key_rewards)
    return assemble_result(model, parties, names, surprise, shapley, releases, rewards)


def _parameter_names(model, parties) -> list[str] | None:
    """The names of theta's coordinates where the model gives them (`parameter_names(num_features)`) and the
    parties' feature count is known."""
    num_features, parameter_names = parties[0].num_features, capabilities(model).parameter_names
    if num_features is None or parameter_names is None:
        return None
    return list(parameter_names(num_features))


def _provenance(model, parties) -> dict[str, str]:
    """Per party, before releasing: a 'new' release, a 'reused' one, or one 'released before this call'."""
    provenance = {}
    for party in parties:
        if isinstance(party, PerturbedStatistic):
            caveats = party.caveats
            provenance[party.owner] = "released before this call" + (f" ({'; '.join(caveats)})" if caveats else "")
        else:
            earlier = party.current_release(model.statistic(party.num_features))
            provenance[party.name] = "new" if earlier is None else "reused"
    return provenance


def _placeholder_data(model, parties) -> NoiseAwareData:
    """Data of the releases' shapes, for checking the model before anything is released."""
    sizes = [model.statistic(p.num_features).size if isinstance(p, Party) else p.perturbed.size for p in parties]
    return NoiseAwareData(jnp.zeros((len(parties), sizes[0])), jnp.ones(len(parties)), jnp.ones(len(parties)))


def _check_release_fits(model, released: PerturbedStatistic) -> None:
    """A release given to `model` must hold the statistic the model reads (when both are known)."""
    if released.num_features is None or released.statistic is None:
        return
    try:
        expected = describe_statistic(model.statistic(released.num_features))
    except TypeError:
        return
    if expected != released.statistic:
        raise ValueError(
            f"{released.owner}: released a {released.statistic} statistic, but {model.name} reads {expected}"
        )


def _width(party: Party | PerturbedStatistic) -> int | str:
    """A party's number of features, or a release file's statistic length (said so: it counts entries)."""
    return party.num_features if isinstance(party, Party) else f"a statistic of {len(party.perturbed)} entries"
