"""A regression-family estimator of Shapley values: every evaluation serves every player (docs/games.md,
"Regression sampling").

The Shapley value is the solution of a weighted least-squares problem over all coalitions (Charnes et al. 1988;
Lundberg & Lee 2017, Theorem 2): with the Shapley kernel's distribution p over the coalitions of sizes 1..n-1
(size s with probability proportional to 1 / (s (n - s)), uniform members), z the coalition's 0/1 vector,
A = E_p[z z^T] = (1/2 - c) I + c 1 1^T with c = E_p[s (s - 1)] / (n (n - 1)), and Delta = v(N) - v(empty),

    phi_i = Delta / n + E_p[(z_i - s / n) (v(z) - v(empty))] / (1/2 - c),

the constrained solution A^{-1} (b - nu 1) of Covert & Lee (AISTATS 2021, Sec. 3, Eq. 6) written out for this A
(the efficiency constraint sum phi = Delta holds exactly). p is symmetric under complements, so with paired draws
(a coalition and its complement, Covert & Lee 2021, Sec. 4.2) the expectation is E_p[(z_i - s/n) g(z)] / 2 with
g(z) = v(z) - v(N minus z): the empty coalition's value drops out, and the even part of the game with it.

A known A makes the estimate a plain mean, hence unbiased (Covert & Lee's unbiased KernelSHAP), and two controls
have a closed-form contribution (Glasserman 2004, Sec. 4.1, control variates with the coefficient fixed at 1):

* an additive game b . z: E_p[(z_i - s/n) (b . (2z - 1))] = (1 - 2c) (b_i - mean b). Each batch subtracts the
  additive game of the run's estimate so far, beta, and adds b_i - mean b back;
* any function h(s) of the size alone: E_p[(z_i - s/n) h(s)] = 0, since z_i given s is in with probability s/n.
  Each batch subtracts the mean residual of the pair's size (pooled with n - s, whose residual is the negative),
  seen in the earlier batches and in every other pair of this one (leave-one-out: a pair's h never uses its own
  draw; every size is drawn by two pairs, `twin_spots`). On sums of unanimity games this size part was 90 % of the
  variance at 50 players (72 % at 12).

Only the rest of the residual g - beta . (2z - 1) - h(s) is sampled. The controls come from other draws than those
they adjust, so each batch's estimate is unbiased given the batches before it: the batch estimates are martingale
differences around phi, uncorrelated, and their spread over batches is an honest standard error with batches - 1
degrees of freedom (batch means), holding the utility's own noise as far as each batch values its coalitions afresh.
The first batch is a pilot: its beta is zero and its h from its own batch alone, so its estimate varies several
times more than the later ones' (2.4 against 0.12 to 0.7 on the 50-player game, measured before the leave-one-out
control); it trains the controls and is not counted.

The state's groups: 0 the counted batch estimates (coefficient 1), 1..n-1 the sum of the residuals of each size and
their number (coefficient 0: every index alike), n every batch's estimate, the pilot's too (coefficient 0: beta).

Sizes are drawn from q(s) (`design`) with the weight p(s) / q(s): the Shapley kernel itself (q = p), the leverage
scores' uniform sizes (Musco & Witter, ICLR 2025), or q(s) proportional to 1 / sqrt(s (n - s)), which minimises the
variance that independent noise on each evaluation adds, sum_s p(s)^2 s (n - s) / q(s) (Cauchy-Schwarz): the
default, chosen by measurement (docs/games.md, "Regression sampling").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.games.samplers import BatchPlan, BatchStatistics
from bayesval.games.weights import SHAPLEY, Semivalue

DESIGNS = ("sqrt", "kernel", "leverage")
OTHER_SAMPLERS = "PermutationSampler, UniformSampler, StratifiedSampler or SemivalueSampler"


def kernel_sizes(num_players: int) -> np.ndarray:
    """p(s) (n - 1,): the Shapley kernel's probability of each coalition size s = 1..n-1, proportional to
    1 / (s (n - s)) (Lundberg & Lee 2017, Theorem 2, times the binom(n, s) coalitions of the size)."""
    sizes = np.arange(1, num_players)
    kernel = 1.0 / (sizes * (num_players - sizes))
    return kernel / kernel.sum()


def design_sizes(num_players: int, design: str) -> np.ndarray:
    """q(s) (n - 1,): the probability with which `design` draws each coalition size s = 1..n-1."""
    sizes = np.arange(1, num_players)
    shape = {"kernel": kernel_sizes(num_players), "leverage": np.ones(num_players - 1)}.get(design)
    if shape is None:
        shape = 1.0 / np.sqrt(sizes * (num_players - sizes))
    return shape / shape.sum()


@dataclass(frozen=True)
class RegressionSampler:
    """Paired coalitions (S and N minus S) of sizes drawn from `design`, and the empty and grand coalitions, valued
    afresh every batch (batch_size + 2 coalitions; batch_size even, at least twice the number of players,
    `minimum_batch`): each batch after the first (a pilot that trains the controls) is one unbiased estimate of every
    player's Shapley value, and the run's estimate is their mean (module docstring). The sizes of a batch are drawn by
    systematic sampling (one uniform offset, evenly spaced quantiles of q), each for two pairs (`twin_spots`), so each
    size gets its share of the batch to within two pairs and no pair is alone with its size."""

    design: str = "sqrt"

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS}, got {self.design!r}")

    @property
    def name(self) -> str:
        return f"regression ({self.design} sizes)"

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        check_regression(num_players, batch_size, semivalue)
        sizes = np.arange(1, num_players)
        proposal = design_sizes(num_players, self.design)
        kernel = kernel_sizes(num_players)
        pairing = float(np.sum(kernel * sizes * (sizes - 1)) / (num_players * (num_players - 1)))  # c
        scale = jnp.asarray(kernel / proposal / (1.0 - 2.0 * pairing))  # p(s) / q(s) / (1 - 2c), per size
        draw = partial(_regression_masks, logits=jnp.asarray(np.log(proposal)), pairs=batch_size // 2)
        reduce = partial(_regression_reduce, scale=scale)
        coefficients = np.zeros(num_players + 1)  # group 0 the counted batch estimates (module docstring)
        coefficients[0] = 1.0
        no = np.zeros(num_players + 1, bool)
        return BatchPlan(coefficients, no, no, batch_size + 2, draw, reduce, 1.0)


def minimum_batch(num_players: int) -> int:
    """The fewest coalitions a regression batch may draw: twice the players. With fewer pairs some batches hold no
    coalition that tells a player's value apart; their estimates of it repeat the run's (both controls are learnt
    from earlier batches), and a run of such batches shrinks the spread the standard error is read from (3 players
    in batches of 4: one player trusted at z = -36 in 2,000 keys; at 2n the largest |z| in 1,500 keys was 4.7)."""
    return 2 * num_players


def check_regression(num_players: int, batch_size: int, semivalue: Semivalue) -> None:
    """A ValueError for what regression sampling cannot serve: a semivalue other than Shapley (naming the samplers
    that can), fewer than 2 players, or a batch of fewer coalitions than twice the players or an odd number
    (pairs)."""
    if semivalue.kind != "shapley" and not np.allclose(semivalue.weights(num_players), SHAPLEY.weights(num_players)):
        raise ValueError(
            f"RegressionSampler estimates Shapley values only (the Shapley kernel's regression), not the "
            f"{semivalue.name} semivalue; use {OTHER_SAMPLERS} for it"
        )
    if num_players < 2:
        raise ValueError(f"RegressionSampler needs at least 2 players, got {num_players}; one player's value is exact")
    minimum = minimum_batch(num_players)
    if batch_size < minimum or batch_size % 2:
        raise ValueError(
            f"batch_size for RegressionSampler is the coalitions each batch samples in pairs (S and N minus S): an "
            f"even number, at least twice the {num_players} players, so the minimum is {minimum}; got {batch_size}"
        )


def check_budget(evaluation_cap: int | None, batch_size: int, spent: int = 0, why: str | None = None) -> None:
    """A ValueError where the stopping rule caps a new run (`evaluation_cap`, `spent` of them already spent on
    probing the utility) below the two batches of batch_size + 2 coalitions a first value needs (the first batch is a
    pilot that is not counted), naming that minimum (and `why` regression runs, where it was chosen by default)."""
    minimum = 2 * (batch_size + 2) + spent
    if evaluation_cap is not None and evaluation_cap < minimum:
        chosen = "" if why is None else f" (the default here: {why}; sampler=PermutationSampler() needs no pilot)"
        raise ValueError(
            f"stop caps the run at MaxEvaluations({evaluation_cap}), below what RegressionSampler{chosen} needs for a "
            f"first value: two batches of {batch_size} + 2 coalitions (the first a pilot that is not counted)"
            + (f", after the {spent} evaluations that probed the utility" if spent else "")
            + f", so the minimum is {minimum}; raise the cap (about 12 batches, {12 * (batch_size + 2) + spent} "
            "evaluations, give standard errors of 11 degrees of freedom) or pass a smaller batch_size"
        )


def _regression_masks(key, state, logits, pairs: int):
    """The batch's masks: `pairs` coalitions, their complements, the empty and the grand coalition; and from the
    batches before (zeros before the first) the controls: beta, the run's estimate of the sampled game (without a
    control variate's exact part), and per coalition size the sum and number of the residuals seen (n - 1,)."""
    num_players = logits.shape[0] + 1
    beta, sums, counts = np.zeros(num_players), np.zeros(num_players - 1), np.zeros(num_players - 1)
    if state is not None:
        beta = state.sums.mean(axis=0)[-1] / np.maximum(state.counts[-1], 1)
        sums, counts = state.sums.mean(axis=0)[1:-1, 0], state.counts[1:-1, 0]  # every index holds the same sizes
    masks = _paired_masks(key, logits, pairs)
    pilot = jnp.asarray(float(state is None))
    return masks, (masks, jnp.asarray(beta), jnp.asarray(sums), jnp.asarray(counts, jnp.float64), pilot)


@partial(jax.jit, static_argnames=("pairs",))
def _paired_masks(key, logits, pairs: int):
    size_key, single_key, member_key = jax.random.split(key, 3)
    num_players = logits.shape[0] + 1
    cumulative = jnp.cumsum(jnp.exp(logits))
    spots = twin_spots(size_key, single_key, pairs)
    sizes = jnp.minimum(jnp.searchsorted(cumulative, spots), num_players - 2) + 1
    scores = jax.random.uniform(member_key, (pairs, num_players))
    cutoff = jnp.take_along_axis(jnp.sort(scores, axis=1), sizes[:, None] - 1, axis=1)  # the size-th smallest
    chosen = scores <= cutoff  # the `size` players of the smallest scores: a uniform coalition of that size
    ends = jnp.stack([jnp.zeros(num_players, bool), jnp.ones(num_players, bool)])
    return jnp.concatenate([chosen, ~chosen, ends])


def twin_spots(key, single_key, pairs: int):
    """The quantiles (pairs,) of the batch's coalition sizes: pairs // 2 spots by systematic sampling (one uniform
    offset, evenly spaced), each taken by two neighbouring pairs, and for an odd number of pairs one of those spots,
    chosen uniformly, once more (a uniform choice among systematic spots is itself uniform in (0, 1)). Every pair's
    spot is uniform, and a size s is drawn pairs q(s) times in expectation, as by plain systematic sampling; but no
    pair is alone with its size, so the size control of every pair is learnt from another pair of the batch. Where a
    size was drawn once and no batch before had drawn it, the pair's h was 0: the pilot's estimate then missed that
    size's part, and every later batch inherited the error through beta, so that on games whose g is a function of
    the size (pyDVL's voting, miner, shoes and ring spanning tree games) some keys' estimates varied where the
    others' were exact to rounding (docs/games.md, "No pair alone with its size")."""
    twins = pairs // 2
    if twins == 0:  # one pair: its own uniform spot
        return jax.random.uniform(single_key, (1,))
    spots = (jax.random.uniform(key) + jnp.arange(twins)) / twins
    single = spots[jax.random.randint(single_key, (pairs % 2,), 0, twins)]
    return jnp.concatenate([jnp.repeat(spots, 2), single])


@jax.jit
def _regression_reduce(values, aux, scale) -> BatchStatistics:
    """One estimate per utility estimate r (R, n): Delta / n + (beta_i - mean beta) + the weighted mean of
    (z_i - s/n) times the residual g - beta . (2z - 1) - h(s) (group 0), h the mean residual of the pair's size from
    the earlier batches and every other pair of this one (`others_size_means`); and per size the sum of the residuals
    and their number (groups 1..n-1, every index alike), for later batches."""
    masks, beta, past_sums, past_counts, pilot = aux
    num_players = masks.shape[1]
    pairs = (masks.shape[0] - 2) // 2
    chosen = masks[:pairs].astype(values.dtype)  # (P, n)
    sizes = chosen.sum(axis=1).astype(jnp.int32)
    spread = values[:, :pairs] - values[:, pairs : 2 * pairs]  # g (R, P)
    delta = values[:, -1] - values[:, -2]  # (R,)
    centred = beta - beta.mean()
    residual = spread - centred @ (2 * chosen - 1).T  # (R, P)
    of_size = jax.nn.one_hot(sizes - 1, num_players - 1, dtype=values.dtype)  # (P, n - 1)
    sums, counts = past_sums + residual @ of_size, past_counts + of_size.sum(axis=0)
    control = others_size_means(sums, counts, residual, of_size, 2 * sizes == num_players)  # h(s) of each pair (R, P)
    lever = (chosen - chosen.mean(axis=1, keepdims=True)) * scale[sizes - 1][:, None]  # (P, n), each row summing to 0
    estimates = centred + delta[:, None] / num_players + (residual - control) @ lever / pairs  # (R, n)
    by_size = jnp.broadcast_to((residual @ of_size)[:, :, None], (len(values), num_players - 1, num_players))
    sums = jnp.concatenate([(1 - pilot) * estimates[:, None], by_size, estimates[:, None]], axis=1)
    return _filed(sums, jnp.concatenate([1 - pilot[None], of_size.sum(axis=0), jnp.ones(1)]))


def others_size_means(sums, counts, residual, of_size, halfway):
    """h (R, P): for each pair, the mean residual of the pairs of its size s, pooled with size n - s (the same pairs
    seen from the complement, whose residual is the negative: g(N minus z) = -g(z)), over the earlier batches and
    every other pair of the batch, its own residual left out (sums (R, n - 1) and counts (n - 1,) per size hold it);
    0 where no other pair had the size. At s = n / 2 (`halfway`) the pooled mean is 0 whatever was drawn."""
    pooled, seen = sums - sums[..., ::-1], counts + counts[::-1]
    others = of_size @ seen - 1 - halfway  # at s = n / 2 the pair was counted twice, as s and as n - s
    own = jnp.where(halfway, 0.0, residual)
    return jnp.where(others > 0, (pooled @ of_size.T - own) / jnp.maximum(others, 1), 0.0)


def _filed(sums, counts) -> BatchStatistics:
    """BatchStatistics of one draw per group and index: sums (R, G, n), counts (G,) alike for every index."""
    shape = sums.shape[1:]
    averaged = sums.mean(axis=0) / jnp.maximum(counts, 1)[:, None]
    zeros = jnp.zeros(shape)
    counts = jnp.broadcast_to(counts[:, None], shape).astype(jnp.int64)
    low, high = (jnp.where(counts > 0, averaged, bound) for bound in (jnp.inf, -jnp.inf))
    return BatchStatistics(sums, zeros, zeros, zeros, counts, low, high)
