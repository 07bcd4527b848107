"""Posteriors of modified releases and their surprise: what both reward mechanisms evaluate (Sim et al. 2023,
Sec. 5 and App. E.3). A reward q_i = p(theta | modified o_N) only post-processes the releases, so it costs no
privacy (P1); its value r_i = KL(q_i || p(theta)) is estimated exactly as a coalition's v_C is, by the valuation's
own `CoalitionSurprise` (same prior, KL estimator and compiled batch shapes), several trials per sampler call."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from bayesval import progress
from bayesval.inference.data import NoiseAwareData
from bayesval.parties.keys import reward_call_key, reward_prior_key
from bayesval.parties.surprise import CoalitionSurprise, per_repeat


class Evaluation(NamedTuple):
    """One trial: the parameter (kappa or tau), r (mean over repeats) with its standard error, and the draws (m, d)."""

    parameter: float
    value: float
    stderr: float
    draws: np.ndarray | None


class RewardSampler:
    """Samples p(theta | inputs) under modified inputs for many trials at once: a sampler call holds `slots` trials,
    each with every repeat, in the valuation's batch of rows. Call j draws from `reward_call_key(key, j)`
    (`bayesval.parties.keys`).

    Everything it needs of the valuation's `CoalitionSurprise` is read here, once, through its public surface: the
    game (`surprise.game`: the releases, the k of its KL estimator, the repeats and chain length of its
    `SamplerConfig`), its batch of rows for the grand coalition (`rows_per_batch`), `of_inputs` (the surprise of
    coalitions under modified releases) and `prior_draws`. A search never touches the surprise again.
    """

    def __init__(self, surprise: CoalitionSurprise, key: jax.Array) -> None:
        game = surprise.game
        self.surprise, self.key = surprise, key
        self.data: NoiseAwareData = game.data
        self.num_parties = int(self.data.counts.shape[0])
        self.k = game.k
        self.num_repeats = game.config.num_repeats
        layout = surprise.layout
        self.batch_rows = layout.rows_per_batch(layout.width(self.num_parties))  # a reward is of all parties
        self.slots = max(1, self.batch_rows // self.num_repeats)
        self.chain_length = game.config.num_samples // game.config.thinning  # draws run chain by chain
        self._of_inputs = surprise.of_inputs
        self._prior_draws = surprise.prior_draws
        self._sampled_draws = surprise.pooled_draws
        self.calls = 0

    def sampled_draws(self, masks: np.ndarray) -> list[np.ndarray] | None:
        """The draws (m, d) of each coalition mask of the valuation's own releases that the valuation kept when it
        sampled them (`CoalitionSurprise(pooled_draws_of=...)`); None unless it kept every one."""
        codes = [int(code) for code in np.asarray(masks, bool) @ (1 << np.arange(self.num_parties))]
        if not all(code in self._sampled_draws for code in codes):
            return None
        return [self._sampled_draws[code] for code in codes]

    def evaluate(
        self, inputs: list[NoiseAwareData], parameters, masks: np.ndarray | None = None, *, stage: str = "rewards"
    ) -> list[Evaluation]:
        """r of each input's coalition (default: the grand coalition), ceil(len / slots) sampler calls, whose
        progress bars say `stage`."""
        if masks is None:
            masks = np.ones((len(inputs), self.num_parties), bool)
        rows = len(inputs) * self.num_repeats
        with progress.stage(stage, calls=math.ceil(rows / self.batch_rows)):
            values, draws = self._of_inputs(reward_call_key(self.key, self.calls), inputs, masks)
        self.calls += math.ceil(len(inputs) / self.slots)
        mean, stderr = per_repeat(values)
        return [Evaluation(float(p), float(m), float(s), d) for p, m, s, d in zip(parameters, mean, stderr, draws)]

    def prior(self, num_draws: int) -> np.ndarray:
        """Draws of p(theta): the reward of a party whose target is 0."""
        return self._prior_draws(reward_prior_key(self.key), num_draws)
