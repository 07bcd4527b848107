"""Semivalues of a utility: exactly, by enumerating every coalition in fixed-size chunks, or by sampling coalitions
in fixed-size batches until a stopping rule holds (docs/games.md, "Design").

A utility is a pure function `utility(key, masks) -> values`: masks (B, n) boolean, values (B,), or (R, B) for R
independent estimates of each coalition's value (as the party surprise gives per repeat); its values of a coalition
are draws under each batch's key, and only a `KeylessUtility`'s are exact (`bayesval.games.utilities`). Batch b of a
run draws its coalitions from `fold_in(key, b)` (split into the sampler's key and the utility's), so the values
depend on the key, the batch size and the number of batches only: a run stopped and resumed (`resume_from=result`)
gives the values of an uninterrupted run with the same key, to the last bit.
"""

from __future__ import annotations

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from bayesval.batching import batches, pad_rows
from bayesval.digests import content_parts
from bayesval.games.choice import Probed, SamplerChoice, default_choice, given_sampler
from bayesval.games.control import ControlVariate, EstimatedControl
from bayesval.games.fingerprint import (
    check_game_id,
    evaluated,
    fingerprint,
    made_of,
    probe_key,
    probe_masks,
    utility_name,
)
from bayesval.games.masks import code_masks, members
from bayesval.games.regression import RegressionSampler, check_budget
from bayesval.games.samplers import SAMPLERS, Sampler, default_sampler
from bayesval.games.stopping import (
    DEFAULT_MAX_EVALUATIONS,
    MaxEvaluations,
    Progress,
    StandardError,
    capped,
    evaluation_cap,
    judgement,
)
from bayesval.games.utilities import KeyAloneCheck, KeylessUtility, NoisyValues, Utility
from bayesval.games.weights import Semivalue, as_semivalue, coalition_coefficients
from bayesval.progress import seconds_since, shown
from bayesval.results.result import ValuationResult
from bayesval.results.state import (
    SemivalueState,
    describe_control,
    describe_error,
    describe_game,
    game_difference,
    renamed,
    same_control,
)
from bayesval.results.variance import MAX_VALUE, spread, trusted
from bayesval.validation import check_bool, check_count, check_int, check_key, user_stacklevel

SHOWN_COALITIONS = 5  # coalitions named in a NaN error


def semivalue(
    utility: Utility,
    num_players: int,
    key,
    *,
    weights: str | Semivalue = "shapley",
    sampler: Sampler | None = None,
    stop=None,
    batch_size: int | None = None,
    names: list[str] | None = None,
    resume_from: ValuationResult | None = None,
    control: ControlVariate | EstimatedControl | None = None,
    independent_estimates: bool = False,
    progress_bar: bool = False,
    game_id: str | None = None,
) -> ValuationResult:
    """Sample the semivalue `weights` of `utility` over `num_players` players until `stop` holds.

    sampler      `PermutationSampler`, `UniformSampler`, `StratifiedSampler`, `SemivalueSampler` or, for Shapley,
                 `RegressionSampler` (docs/games.md, "Regression sampling"; its batch_size counts coalitions, at least
                 n). Default (docs/games.md, "The default sampler"; `diagnostics["sampler"]` says which ran and why):
                 for Shapley, regression sampling where the utility is noisy (probed: `bayesval.games.choice`) and
                 permutations where it is exact; uniform with maximum sample reuse for Banzhaf, the semivalue's own
                 distribution for the others. A sampler whose importance weights are heavy-tailed gets a warning
    stop         a stopping rule (`bayesval.games.stopping`); one without an evaluation or time cap gets a warning
                 and a default cap. Default: StandardError(0.01) | MaxEvaluations(DEFAULT_MAX_EVALUATIONS)
    batch_size   draws per batch (permutations, coalitions, or draws per index for stratified sampling); default
                 64 (4.5n coalitions, even, for the regression chosen), or resume_from's (its key's, else its last)
    resume_from  a result of this game to continue: its draws count, and with the same key (and batch size) the
                 run goes on at the next batch, with another key it adds new batches; it must have the same control
                 and the same game: the same game_id, or a utility of the same values on fixed probe coalitions
    game_id      the caller's own name for the game, kept in the state instead of the utility's fingerprint (its
                 values on `bayesval.games.fingerprint.PROBES` fixed coalitions, valued once a run): for a utility
                 whose values are not a pure function of (key, masks), or that is costly to value
    control      a `ControlVariate`, a surrogate u known on every coalition: the draws are of v - u and phi(u), exact,
                 is added back (unbiased whatever u is; docs/games.md, "Control variates"); or an
                 `EstimatedControl`, u a function of the coalition whose phi(u) was estimated from another key: its
                 variance adds to the run's (docs/games.md, "Multi-fidelity control variates")
    independent_estimates  for a utility of R > 1 estimates per coalition: True where it caches them (a coalition
                 asked for again gets the same estimates) and different coalitions' errors are independent. The
                 utility's own error is then estimated as the exact semivalue's, from the estimates of every coalition
                 valued (`bayesval.results.coalition_noise`); by default it is the spread of the R semivalues of each
                 estimate alone: R - 1 degrees of freedom and part of the error counted twice, but right also where
                 errors correlate between coalitions (common random numbers; docs/games.md, "The utility's own error")

    Returns a ValuationResult with values, stderr (the Monte Carlo error of the sampling: 0 only where a value is
    exact, inf where nothing in the game has varied, docs/games.md), counts per index, the converged flag per index
    (never on an index whose draws were all equal unless its value is exact: `bayesval.results.variance.judged`,
    which gives the verdicts too), per index in `diagnostics["indices"]` the draws, their range,
    whether the value is exact and why it is or is not converged, and the state to resume or merge (`a + b`).
    """
    _check_utility(utility)
    num_players = check_int("num_players", num_players, minimum=1)
    key = check_key("key", key)
    batch_size = None if batch_size is None else check_count("batch_size", batch_size, minimum=1)
    check_bool("progress_bar", progress_bar)
    game_id = check_game_id(game_id)
    check_bool("independent_estimates", independent_estimates)
    semivalue = as_semivalue(weights)
    names = _check_names(names, num_players)
    stop = capped(StandardError(0.01) | MaxEvaluations(DEFAULT_MAX_EVALUATIONS) if stop is None else stop)
    control = _check_control(control, num_players)
    stream = jax.random.key_data(key).tobytes().hex()
    content = None if game_id is not None else content_parts(made_of(utility))  # before a call fills a cache
    choice = _chosen(utility, sampler, semivalue, num_players, batch_size, resume_from, stream, game_id, names)
    sampler, batch_size = choice.sampler, choice.batch_size
    plan = _planned(choice, num_players, semivalue, stop, resume_from is not None)
    game = _fingerprint(utility, num_players, game_id, names, content, choice.probe_values)
    keyed = not isinstance(utility, KeylessUtility)
    state, batch = _resumed(resume_from, names, semivalue, sampler, stream, batch_size, control, keyed)
    _check_resumed_alike(state, plan, batch_size, game, independent_estimates)
    started = time.perf_counter()
    progress = None if state is None else _progress(state, started, stop.history, record=False)
    method = f"{semivalue.name} by {sampler.name} sampling"
    key_alone = KeyAloneCheck(names, ended=not keyed)
    bar = tqdm(disable=not shown(progress_bar), desc=method, unit=" evaluations")
    while progress is None or not (stop.holds(progress) and state.every_group_drawn):
        draw_key, utility_key = jax.random.split(jax.random.fold_in(key, batch))
        masks, aux = plan.draw(draw_key, state)
        values = _batch_values(utility, utility_key, masks, names, state is None, key_alone, control)
        batch_draws = plan.reduce(values, aux)
        if state is None:
            cached = independent_estimates
            state = _first_state(semivalue, sampler, plan, len(values), num_players, control, cached, keyed)
            state.game, state.evaluations = game, choice.evaluations
        _check_same_repeats(values, state)
        state.add(batch_draws, values, masks, names)
        if keyed and progress is None:
            _warn_equal_keyed_draws(state, semivalue)
        batch += 1
        state.streams[stream] = [batch_size, batch]
        progress = _progress(state, started, stop.history)
        bar.update(plan.num_masks)
    bar.close()
    method += "" if control is None else f", {control.name} as a control variate"
    return _sampled_result(
        method, names, state, progress, stop, {"batches": batch, "batch_size": batch_size, "sampler": choice.why}
    )


def _batch_values(utility, key, masks, names: list[str], first: bool, key_alone: KeyAloneCheck, control) -> jax.Array:
    """The utility's values (R, B) of a batch's masks under its key, checked (`checked_values`, and `key_alone` for
    copies that are one draw), less the control variate's where there is one."""
    values = checked_values(evaluated(utility, key, masks, len(names), first), masks, names)
    key_alone.add(masks, values)
    return values if control is None else values - control(np.asarray(masks))


def _check_same_repeats(values, state: SemivalueState) -> None:
    """A batch's estimates per coalition (R of the values (R, B)) are the run's so far."""
    if len(values) != state.num_repeats:
        raise ValueError(
            f"utility returned {len(values)} estimates per coalition, but the run so far had {state.num_repeats}"
        )


def _sampled_result(method: str, names, state: SemivalueState, progress: Progress, stop, batches: dict):
    """The result of a sampled run: values, standard errors and the stopping rule's verdicts from its last
    `progress`, its state, and the diagnostics (`batches`: the batches drawn and their size)."""
    judged = judgement(progress, stop)
    return ValuationResult(
        method=method,
        values=progress.values,
        stderr=progress.stderr,
        names=names,
        diagnostics={
            "stop": repr(stop),
            "evaluations": state.evaluations,
            **batches,
            "seconds": progress.elapsed,
            "utility_error": describe_error(state),
            "indices": state.index_diagnostics(progress.dof, judged.verdicts),
        },
        counts=progress.counts,
        converged=judged.converged,
        state=state,
    )


def exact_semivalue(
    utility: Utility,
    num_players: int,
    key,
    *,
    weights: str | Semivalue = "shapley",
    batch_size: int = 4096,
    names: list[str] | None = None,
) -> ValuationResult:
    """The semivalue `weights` of `utility` from all 2^n coalitions, valued in chunks of `batch_size` masks (the last
    chunk padded with the empty coalition), phi = sum_c C[c] v(c) (`weights.coalition_coefficients`). Chunk c's
    utility key is fold_in(key, c). With R estimates per coalition the standard error is the spread of the R
    semivalues over sqrt(R), of R - 1 degrees of freedom (`diagnostics["dof"]`), and an index is converged only where
    they are trusted (`bayesval.results.variance.trusted`: at least TRUSTED_DOF; R semivalues that agree to rounding
    are exact only for a `KeylessUtility`, and for a keyed utility 2 estimates that happened to agree once gave a
    standard error of 0 on a value wrong by its own size); with one, the error of the variances a utility returns
    as `NoisyValues`, sqrt(sum_c C[c]^2 sigma_c^2); else 0."""
    _check_utility(utility)
    num_players = check_int("num_players", num_players, minimum=1, maximum=30)
    key = check_key("key", key)
    batch_size = check_count("batch_size", batch_size, minimum=1)
    semivalue = as_semivalue(weights)
    names = _check_names(names, num_players)
    total, rows = 2**num_players, min(batch_size, 2**num_players)
    per_repeat, coalition_values, noise = None, [], np.zeros(num_players)
    for chunk in batches(total, rows):  # codes are made per batch: 2^n of them need not fit in memory
        codes = pad_rows(np.arange(chunk.start, chunk.stop), rows, fill=0)
        masks = code_masks(jnp.asarray(codes), num_players)
        output = evaluated(utility, jax.random.fold_in(key, chunk.index), masks, num_players, chunk.index == 0)
        values = np.asarray(checked_values(output, masks, names))[:, : chunk.count]
        coefficients = coalition_coefficients(np.asarray(masks)[: chunk.count], semivalue)
        phi = values @ coefficients
        if isinstance(output, NoisyValues):  # the variance of phi from each coalition's own error
            noise += checked_variances(output, masks, names)[:, : chunk.count].mean(axis=0) @ coefficients**2
        per_repeat = phi if per_repeat is None else per_repeat + phi
        coalition_values.append(values.mean(axis=0))
    repeats = len(per_repeat)
    stderr = per_repeat.std(axis=0, ddof=1) / np.sqrt(repeats) if repeats > 1 else np.sqrt(noise)
    converged, dof = np.ones(num_players, bool), np.full(num_players, np.inf)
    if repeats > 1:  # the repeats' spread is the error, of repeats - 1 degrees of freedom
        agreed = spread(per_repeat.min(axis=0), per_repeat.max(axis=0)) == 0
        stderr = np.where(agreed, 0.0, stderr)
        dof = np.full(num_players, repeats - 1.0)
        converged = trusted(agreed & isinstance(utility, KeylessUtility), stderr, dof)
    keep = num_players <= 16  # the coalitions' values, where they fit a result
    return ValuationResult(
        method=f"exact {semivalue.name}",
        values=per_repeat.mean(axis=0),
        stderr=stderr,
        names=names,
        coalition_masks=code_masks(np.arange(1, total), num_players) if keep else None,
        coalition_values=np.concatenate(coalition_values)[1:] if keep else None,
        diagnostics={"evaluations": total, "estimates_per_coalition": repeats, "dof": dof},
        converged=converged,
    )


def checked_values(values, masks, names: list[str]) -> jax.Array:
    """A utility's values as float64 (R, B) for masks (B, n), or a ValueError: a shape that is neither (B,) nor
    (R, B), or a NaN / inf value, naming the coalitions that got one. Of `NoisyValues`, the values, once their
    variances are checked (`checked_variances`)."""
    if isinstance(values, NoisyValues):
        checked_variances(values, masks, names)
        values = values.values
    try:
        values = jnp.asarray(values)
    except (TypeError, ValueError):
        raise TypeError(
            f"utility must return numbers, an array of shape (B,) or (R, B), got {type(values).__name__}: "
            f"{values!r:.80}"
        ) from None
    if jnp.iscomplexobj(values):
        raise TypeError(f"utility must return real numbers, got {values.dtype} (an imaginary part would be dropped)")
    batch = masks.shape[0]
    if values.ndim not in (1, 2) or values.shape[-1] != batch:
        raise ValueError(
            f"utility must return values of shape (B,) or (R, B) for masks of shape (B, n) = {tuple(masks.shape)}; "
            f"got shape {tuple(values.shape)}"
        )
    values = jnp.atleast_2d(values).astype(jnp.float64)
    if not bool(jnp.isfinite(values).all()):
        count, coalitions = _listed((~np.isfinite(np.asarray(values))).any(axis=0), masks, names)
        raise ValueError(
            f"utility returned NaN or inf for {count} coalitions (members listed): {coalitions}; a coalition's value "
            "must be a finite number (give the empty coalition a value too, e.g. 0)"
        )
    if float(jnp.abs(values).max(initial=0.0)) > MAX_VALUE:
        count, coalitions = _listed((np.abs(np.asarray(values)) > MAX_VALUE).any(axis=0), masks, names)
        raise ValueError(
            f"utility returned values above {MAX_VALUE:g} in absolute value for {count} coalitions (members listed): "
            f"{coalitions}; the sums of powers of their marginal contributions behind the standard errors would "
            "overflow: rescale the utility (divide it by a constant; semivalues scale with it)"
        )
    return values


def checked_variances(output: NoisyValues, masks, names: list[str]) -> np.ndarray:
    """The variances of a utility's `NoisyValues` as float64 (R, B), the shape of its values, or a ValueError: another
    shape, or a negative, NaN or inf variance, naming the coalitions that got one."""
    values = jnp.atleast_2d(jnp.asarray(output.values))
    try:
        variances = np.atleast_2d(np.asarray(output.variances, np.float64))
    except (TypeError, ValueError):
        raise TypeError(f"NoisyValues.variances must be numbers, got {type(output.variances).__name__}") from None
    if variances.shape != values.shape:
        raise ValueError(
            f"NoisyValues.variances must have the shape of its values, {tuple(values.shape)}; got "
            f"{tuple(variances.shape)}"
        )
    bad = ~(np.isfinite(variances) & (variances >= 0))
    if bad.any():
        count, coalitions = _listed(bad.any(axis=0), masks, names)
        raise ValueError(
            f"utility returned variances that are negative, NaN or inf for {count} coalitions (members listed): "
            f"{coalitions}; a variance is a finite number, 0 or more (0 where a value is exact)"
        )
    return variances


def _listed(bad: np.ndarray, masks, names: list[str]) -> tuple[int, str]:
    """How many distinct coalitions of `masks` (B, n) the flags `bad` (B,) mark, and the first few by members."""
    rows = np.asarray(masks)[bad]
    rows = rows[np.sort(np.unique(rows, axis=0, return_index=True)[1])]  # each coalition once, in batch order
    coalitions = [members(mask, names) for mask in rows[:SHOWN_COALITIONS]]
    more = f" and {len(rows) - SHOWN_COALITIONS} more" if len(rows) > SHOWN_COALITIONS else ""
    return len(rows), f"{coalitions}{more}"


def _check_utility(utility) -> None:
    if not callable(utility):
        raise TypeError(f"utility must be callable as utility(key, masks) -> values, got {type(utility).__name__}")


def _check_sampler(sampler) -> Sampler:
    if not isinstance(sampler, (*SAMPLERS, RegressionSampler)):
        raise TypeError(
            "sampler must be a PermutationSampler, UniformSampler, StratifiedSampler, SemivalueSampler or "
            f"RegressionSampler, got {type(sampler).__name__}"
        )
    return sampler


def _warn_unreliable(plan, semivalue: Semivalue, sampler: Sampler, num_players: int) -> None:
    """A warning where the plan says its standard errors and convergence flags are not to be trusted (heavy-tailed
    importance weights, layers with too few draws: docs/games.md, "Calibration"), naming the sampler to use."""
    if plan.unreliable is None:
        return
    better = default_sampler(semivalue)
    warnings.warn(
        f"{sampler.name} sampling of the {semivalue.name} semivalue on {num_players} players: {plan.unreliable}. "
        f"Its standard errors and convergence flags are not reliable; use {type(better).__name__}() (the default "
        f"for {semivalue.name}) instead",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def _warn_equal_keyed_draws(state: SemivalueState, semivalue: Semivalue) -> None:
    """A warning where, after a new run's first batch, a keyed utility's values of each single coalition that some
    index is made of (leave-one-out's everyone-else) were the same each time they were drawn: the run cannot tell a
    utility that ignores its key from a noisy one whose noise did not show, so those draws count as all equal, which
    never converge (`bayesval.results.variance.judged`); a utility of the masks alone says so by its form."""
    weighted = state.coefficients != 0
    single = state.exact[weighted].all() and state.counts[weighted].min() >= 2  # one coalition each, valued twice
    if not single or not (state.ranges == 0).any():
        return
    equal = int((state.ranges == 0).sum())
    warnings.warn(
        f"the utility takes a key, and its values of the single coalitions that make up the {semivalue.name} "
        f"semivalue of {equal} of the {state.num_players} players were the same each time the first batch valued "
        f"them ({int(state.index_counts.min())} draws a player): a keyed utility's values are draws that may differ "
        "under another key, so these count as draws "
        "that were all equal, and they never converge. If its values do not depend on the key, pass "
        "KeylessUtility(lambda masks: ...) (bayesval.games) and they are exact; if it is noisy, the run goes on "
        "until they vary, or to its cap",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def _first_state(semivalue, sampler, plan, num_repeats: int, num_players: int, control, cached, keyed):
    """The state before a new run's first batch, with the control variate's table and exact semivalue if any, a
    record of the coalitions' estimates where the utility caches them (`cached`: independent_estimates), and no exact
    group where the utility takes a key (`keyed`: `bayesval.games.utilities`)."""
    estimated = isinstance(control, EstimatedControl)
    return SemivalueState.empty(
        semivalue.name,
        sampler.name,
        plan,
        num_repeats,
        num_players,
        control_table=None if control is None or estimated else control.table,
        control_semivalue=None if control is None else control.semivalue(semivalue),
        weights=semivalue.weights(num_players) if cached else None,
        control_variance=control.variances if estimated else None,
        control_dof=control.dof if estimated else None,
        control_name=control.name if estimated else None,
        keyed=keyed,
    )


def _planned(choice: SamplerChoice, num_players: int, semivalue: Semivalue, stop, resumed: bool):
    """The chosen sampler's plan for this game; refused where regression sampling's first value does not fit the
    rule's evaluation cap (a new run), warned about where its standard errors are known not to hold."""
    plan = choice.sampler.plan(num_players, choice.batch_size, semivalue)
    if isinstance(choice.sampler, RegressionSampler) and not resumed:
        why = choice.why if choice.evaluations else None
        check_budget(evaluation_cap(stop), choice.batch_size, choice.evaluations, why)
    _warn_unreliable(plan, semivalue, choice.sampler, num_players)
    return plan


def _fingerprint(utility, num_players: int, game_id: str | None, names: list[str], content, probe_values=None) -> dict:
    """The game's fingerprint (`bayesval.games.fingerprint`): the caller's game_id, else the utility's name, its
    values on the probe coalitions (`probe_values` where the sampler's choice valued them already) and its
    `content` (read before the utility's first call)."""
    if game_id is not None:
        return fingerprint(game_id, "", None)
    if probe_values is None:
        masks = jnp.asarray(probe_masks(num_players))
        probe_values = checked_values(evaluated(utility, probe_key(), masks, num_players), masks, names)
    return fingerprint(None, utility_name(utility), np.asarray(probe_values), content)


def _chosen(utility, sampler, semivalue, num_players, batch_size, resume_from, stream, game_id, names):
    """The sampler that runs and its batch size (`bayesval.games.choice`): the caller's, or the default for this
    semivalue and utility; a batch size left out is resume_from's: on this key where it drew from it, else that of
    the key it drew from last (a game resumed with another key goes on in the batches it was sampled in, which a
    sampler such as Latin blocks may need)."""
    resumed = getattr(resume_from, "state", None)
    if batch_size is None and resumed is not None and resumed.streams:
        batch_size = int(resumed.streams.get(stream, list(resumed.streams.values())[-1])[0])
    if sampler is not None:
        return given_sampler(_check_sampler(sampler), batch_size)

    def value(key, masks) -> Probed:
        output = evaluated(utility, key, jnp.asarray(masks), num_players)
        variances = None if not isinstance(output, NoisyValues) else checked_variances(output, masks, names)
        return Probed(np.asarray(checked_values(output, masks, names)), variances)

    resumed_sampler = None if resumed is None else resumed.sampler
    return default_choice(value, semivalue, num_players, batch_size, resumed_sampler, game_id is not None)


def _check_resumed_alike(state: SemivalueState | None, plan, batch_size: int, game: dict, independent_estimates):
    """A resumed state is of this run's groups, game and way of estimating the utility's error (each check below)."""
    _check_same_groups(state, plan, batch_size)
    _check_same_game(state, game)
    _check_estimated_alike(state, independent_estimates)


def _check_same_game(state: SemivalueState | None, game: dict) -> None:
    """A resumed state is of this game (its fingerprint is `game`), or a ValueError naming both; a state saved
    before fingerprints takes this one's, with a warning where the game was not named by the caller."""
    if state is None:
        return
    if state.game is None:
        if "id" not in game:
            warnings.warn(
                "resume_from was saved before results kept their game's fingerprint, so bayesval cannot check that it "
                f"is of this game; it now carries this run's ({describe_game(game)})",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        state.game = game
    elif (difference := game_difference(state.game, game, ("it sampled", "this run"))) is not None:
        raise ValueError(
            f"resume_from is a result of a different game: {difference}; resume with the utility it sampled (or, "
            "for a utility that is not a pure function of (key, masks), pass the same game_id= to both runs; an "
            "attribute a utility changes as it runs, such as a cache, is not read where its name starts with an "
            "underscore)"
        )
    elif renamed(state.game, game):
        warnings.warn(
            f"resume_from sampled a utility named {state.game['utility']}, this run {game['utility']}; they agree on "
            "the probe coalitions, so the run resumes as the same game",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def _check_estimated_alike(state: SemivalueState | None, independent_estimates: bool) -> None:
    """A resumed run estimates the utility's error as the run it resumes did (a record of the coalitions' estimates
    holds every batch's or none)."""
    if state is None or state.num_repeats == 1 or (state.noise is not None) == independent_estimates:
        return
    raise ValueError(
        f"resume_from estimated the utility's own error as {describe_error(state)}; resume with "
        f"independent_estimates={state.noise is not None}, as it was sampled"
    )


def _check_control(control, num_players: int) -> ControlVariate | None:
    if control is not None and not isinstance(control, (ControlVariate, EstimatedControl)):
        raise TypeError(
            "control must be a bayesval.games.ControlVariate(table) or an EstimatedControl (estimated_control(...)), "
            f"got {type(control).__name__}"
        )
    if control is not None and control.num_players != num_players:
        raise ValueError(f"control is a game of {control.num_players} players, this one has {num_players}")
    return control


def _check_names(names, num_players: int) -> list[str]:
    if names is None:
        return [str(i) for i in range(num_players)]
    names = [str(name) for name in names]
    if len(names) != num_players or len(set(names)) != len(names):
        raise ValueError(f"names must be {num_players} distinct names, one per player, got {names}")
    return names


def _resumed(result, names, semivalue: Semivalue, sampler: Sampler, stream: str, batch_size: int, control, keyed):
    """(state, first batch) of a run resuming `result`, or (None, 0) for a new run; with no exact group where the
    utility is `keyed` (`bayesval.games.utilities`)."""
    if result is None:
        return None, 0
    if not isinstance(result, ValuationResult) or result.state is None:
        raise ValueError(
            "resume_from must be a result of bayesval.games.semivalue (with its state; a sorted copy has none), got "
            f"{type(result).__name__ if not isinstance(result, ValuationResult) else 'a result without state'}"
        )
    state = result.state
    for label, theirs, mine in (
        ("num_players", state.num_players, len(names)),
        ("names", result.names, names),
        ("semivalue", state.semivalue, semivalue.name),
        ("sampler", state.sampler, sampler.name),
    ):
        if theirs != mine:
            raise ValueError(
                f"resume_from is a result of a different game: its {label} is {theirs!r}, this run's {mine!r}"
            )
    table = getattr(control, "table", None)
    estimate = getattr(control, "estimate", None)
    _check_estimated_surrogate(state, control)
    if not (same_control(state.control_table, table) and _same_estimate(state, estimate)):
        estimated = state.control_variance is not None
        there = "an estimated surrogate" if estimated else describe_control(state.control_table)
        here = "an estimated surrogate" if estimate is not None else describe_control(table)
        raise ValueError(
            f"resume_from sampled with control variate {there}, this run with {here}: its draws are of another "
            "difference v - u, or phi(u) was estimated otherwise; resume with the same control"
        )
    used_batch_size, done = state.streams.get(stream, (batch_size, 0))
    if used_batch_size != batch_size:
        raise ValueError(
            f"resume_from drew batches of {used_batch_size} from this key; resume with batch_size={used_batch_size} "
            f"(or use another key), got batch_size={batch_size}"
        )
    resumed = state.copy()
    resumed.keyed = resumed.keyed or keyed  # a keyed utility's values of a coalition are draws, whatever came before
    return resumed, done


def _check_same_groups(state: SemivalueState | None, plan, batch_size: int) -> None:
    """A resumed state files its draws in the groups of coalition sizes this run's plan draws (its coefficients c_g):
    semivalue sampling cuts the middle sizes into bins by the batch size, and a draw added to another layout's bin
    would bias the estimate."""
    if state is None or np.array_equal(state.coefficients, plan.coefficients):
        return
    used = sorted({size for size, _ in state.streams.values()})
    raise ValueError(
        f"resume_from filed its draws in {len(state.coefficients)} groups of coalition sizes, this run's batches of "
        f"{batch_size} in {len(plan.coefficients)} groups of other sizes ({state.sampler} sampling cuts them by the "
        f"batch size): resume with the batch size it ran with ({', '.join(map(str, used))})"
    )


def _check_estimated_surrogate(state: SemivalueState, control) -> None:
    """A run sampled against an estimated control resumes only against the same surrogate u, by name
    (`EstimatedControl.name`): its phi(u) was estimated of that u, and its draws are of v - u. A state saved before
    the name was recorded cannot be checked, and is refused."""
    if state.control_variance is None or not isinstance(control, EstimatedControl):
        return
    if state.control_name is None:
        raise ValueError(
            "resume_from was sampled against an estimated surrogate before results recorded which surrogate, so "
            f"bayesval cannot check that this run's ({control.name!r}) is the same function of the coalitions; value "
            "the game again without resume_from"
        )
    if state.control_name != control.name:
        raise ValueError(
            f"resume_from was sampled against the estimated surrogate {state.control_name!r}, this run against "
            f"{control.name!r}: its draws are of another difference v - u; resume with the same surrogate"
        )


def _same_estimate(state: SemivalueState, estimate: np.ndarray | None) -> bool:
    """Whether a resumed state's estimated phi(u) is `estimate` (both none where phi(u) is exact or absent)."""
    if state.control_variance is None or estimate is None:
        return state.control_variance is None and estimate is None
    return np.array_equal(state.control_semivalue, estimate)


def _progress(state: SemivalueState, started: float, history: int, record: bool = True) -> Progress:
    """The run's progress; `record` files the current ranking (once per batch) for rank-stability rules."""
    values, variances, dof = state.estimate()
    if history and record:
        ranking = np.argsort(-values, kind="stable")[None]
        state.rankings = np.concatenate([state.rankings, ranking])[-history:]
    return Progress(
        values,
        np.sqrt(variances),
        state.index_counts,
        state.evaluations,
        seconds_since(started),
        state.rankings,
        state.ranges,
        state.exact_indices,
        dof,
    )
