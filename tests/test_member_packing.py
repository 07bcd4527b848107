"""A coalition costs what its members cost: where the model packs members (`LinearRegression`), each coalition's
chains are given its members' releases only, in a few widths, and still sample p(theta | o_C)."""

import warnings

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.divergence import nig_kl
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import plan, surprise
from bayesval.parties.plan import PACK_FROM_PARTIES, member_width, worth_packing


def _data(num_parties: int) -> NoiseAwareData:
    perturbed = np.arange(num_parties * 3, dtype=np.float64).reshape(num_parties, 3)
    return NoiseAwareData(perturbed, np.arange(1.0, num_parties + 1), np.full(num_parties, 0.5))


def test_members_come_first_in_order_then_masked_out_fillers():
    data = _data(6)
    mask = np.array([False, True, False, True, True, False])
    packed, packed_mask = data.members(mask, 4)
    np.testing.assert_array_equal(packed.counts, [2.0, 4.0, 5.0, 1.0])  # parties 1, 3, 4, then filler 0
    np.testing.assert_array_equal(packed.perturbed, np.asarray(data.perturbed)[[1, 3, 4, 0]])
    np.testing.assert_array_equal(packed_mask, [True, True, True, False])
    same, same_mask = data.members(mask, 6)  # full width: untouched, the unpacked path's own input
    assert same is data and same_mask is not None and (same_mask == mask).all()
    with pytest.raises(ValueError, match="a coalition of 3 of 6 parties cannot be packed into 2 slots"):
        data.members(mask, 2)


@pytest.mark.parametrize("num_parties", [1, 2, 3, 5, 6, 8, 12, 50])
def test_member_widths_are_at_most_three_thirds_of_the_parties(num_parties):
    widths = [member_width(size, num_parties) for size in range(1, num_parties + 1)]
    if num_parties < PACK_FROM_PARTIES:
        assert set(widths) == {num_parties}
    else:
        step = -(-num_parties // 3)
        assert all(size <= width < size + step for size, width in enumerate(widths, start=1))
        assert len(set(widths)) == 3 and widths[-1] == num_parties  # the grand coalition is never packed


class _Recording(bv.models.LinearRegression):
    """LinearRegression that records the releases and masks each sampler call is given."""

    def __init__(self, **settings):
        super().__init__(**settings)
        object.__setattr__(self, "calls", [])

    def posterior_draws(self, key, data, masks, config):
        self.calls.append((np.asarray(data.perturbed), np.asarray(masks)))
        return super().posterior_draws(key, data, masks, config)


def test_members_only_chains_match_the_closed_form_at_negligible_noise(monkeypatch):
    """Syn parties of 100, 100, 200 and 200 points at epsilon = 1e7, packed from 4 parties on: the sampler is
    given each coalition's members (then fillers, masked out) in widths 2 and 4, in one call per width that holds
    that width's rows and no more, and every v_C is within 4 % of the closed-form KL(NIG posterior || NIG prior)
    of the coalition's exact statistics (Sim et al. 2023, Sec. 3)."""
    syn = make_syn(seed=0, sizes=(100, 100, 200, 200))
    parties = [
        bv.Party(X, y, epsilon=1e7, bounds=syn.bounds, name=f"p{i}", noise_seed=10 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    releases = [party.release() for party in parties]
    monkeypatch.setattr(plan, "PACK_FROM_PARTIES", 4)
    monkeypatch.setattr(plan, "PACK_FROM_CHAIN_SWEEPS", 4_400)  # this test's budget: 2 x 1,100 x 2
    model = _Recording()
    config = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=1000, num_repeats=2, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(model, releases, key=0, config=config)

    masks = ((np.arange(1, 16)[:, None] >> np.arange(4)) & 1).astype(np.float64)
    statistics = np.stack([party.exact_statistic() for party in parties])
    sizes = np.array([len(party.X) for party in parties], np.float64)
    prior = model.priors(2).model
    exact = [nig_kl(model.exact_posterior(mask @ statistics, mask @ sizes, 2), prior) for mask in masks]
    np.testing.assert_allclose(result.coalition_values, exact, rtol=0.04)

    released = np.stack([np.asarray(r.perturbed) for r in releases])
    coalitions, widths = set(), set()
    for perturbed, masks in model.calls:
        widths.add(masks.shape[1])
        for row, row_mask in zip(perturbed, masks):
            size = int(row_mask.sum())
            assert masks.shape[1] == member_width(size, 4)
            slots = np.array([np.flatnonzero((released == slot).all(axis=1))[0] for slot in row])
            assert len(set(slots)) == len(slots)  # every slot a different party's release
            if masks.shape[1] < 4:
                assert row_mask[:size].all()  # members first
            coalitions.add(frozenset(slots[row_mask].tolist()))
    assert len(coalitions) == 15 and widths == {2, 4}
    # each width's calls hold its own rows, 10 coalitions x 2 repeats at width 2 and 5 x 2 at width 4, not padding
    # up to the whole game's 30 rows each
    assert sorted(len(masks) for _, masks in model.calls) == [10, 20]


def test_packing_waits_for_a_budget_whose_sweeps_outweigh_the_extra_programs():
    fast, smoke = bv.SamplerConfig.preset("fast"), bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=20)
    assert worth_packing(fast) and worth_packing(bv.SamplerConfig.preset("paper")) and not worth_packing(smoke)


def test_a_lone_slow_coalition_is_rerun_in_the_width_whose_calls_carry_the_fewest_slots(monkeypatch):
    """Five Syn parties at epsilon = 1e7, packed from 5 parties on: widths 2, 4 and 5 hold 15, 15 and 1 coalitions,
    so a call pads to 30, 30 and 2 rows (2 repeats). A slow coalition of 3 members (width 4) is rerun at width 5: one
    call of 2 rows x 5 slots instead of 30 rows x 4, through the program the grand coalition compiled. Its packed
    chains still sample p(theta | o_C): the rerun's v_C is within 4 % of the closed-form NIG KL (Sim et al. 2023,
    Sec. 3), and the coalition that passed keeps its estimates to the bit."""
    syn = make_syn(seed=0, sizes=(100, 100, 100, 200, 200))
    parties = [
        bv.Party(X, y, epsilon=1e7, bounds=syn.bounds, name=f"p{i}", noise_seed=20 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    data = NoiseAwareData.from_releases([party.release() for party in parties])
    monkeypatch.setattr(plan, "PACK_FROM_PARTIES", 5)
    monkeypatch.setattr(plan, "PACK_FROM_CHAIN_SWEEPS", 0)
    config = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=400, num_repeats=2, progress_bar=False)
    slow, whole = 0b00111, 0b11111  # three members (width 4), and the grand coalition (width 5)
    masks = ((np.array([slow, whole])[:, None] >> np.arange(5)) & 1).astype(bool)

    def coalition_surprise(model, reruns):
        return surprise.CoalitionSurprise(model, data, config.with_(reruns=reruns), 4, jax.random.key(1), 31)

    first = coalition_surprise(bv.models.LinearRegression(), reruns=0)
    first(masks)
    assert [first.layout.rows_per_batch(width) for width in (2, 4, 5)] == [30, 30, 2]
    ess = dict(zip((slow, whole), first.diagnostics["ess"]))
    assert first.diagnostics["converged"] and ess[slow] < ess[whole]  # measured: 616 against 750 (key 1)
    monkeypatch.setattr(surprise, "ESS_THRESHOLD", (ess[slow] + ess[whole]) / 2)  # only `slow` fails the flag

    model = _Recording()
    rerun = coalition_surprise(model, reruns=1)
    values = rerun(masks)
    assert rerun.diagnostics["reruns"] == [1, 0]
    # the first pass: one call at width 4 (its two rows padded to 30) and one at width 5; the rerun: `slow`'s two
    # rows in one call of width 5, all five parties' slots (at the full width the mask is not packed)
    assert [masks.shape for _, masks in model.calls] == [(30, 4), (2, 5), (2, 5)]
    np.testing.assert_array_equal(model.calls[-1][1], [[True] * 3 + [False] * 2] * 2)
    np.testing.assert_array_equal(values[:, 1], first.values[whole])
    assert not np.array_equal(values[:, 0], first.values[slow])
    statistics = np.stack([party.exact_statistic() for party in parties])
    sizes = np.array([len(party.X) for party in parties], np.float64)
    exact = nig_kl(model.exact_posterior(masks[0] @ statistics, masks[0] @ sizes, 2), model.priors(2).model)
    np.testing.assert_allclose(values[:, 0], exact, rtol=0.04)


@pytest.mark.parametrize("memory_limit_mb", [2, 64, 2048])
def test_the_rerun_width_depends_on_the_game_not_on_the_batch_size(monkeypatch, memory_limit_mb):
    """The width a rerun samples its coalitions at is ranked by the game's coalitions per width (6 parties: 21, 35
    and 7 at widths 2, 4 and 6), not by the rows a call holds, so the rerun's chains, and its estimates, are the
    same at any batch size: here calls of very different sizes (memory_limit_mb) choose the same widths."""
    syn = make_syn(seed=0, sizes=(100,) * 6)
    releases = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=30 + i).release()
        for i, (X, y) in enumerate(syn.parties)
    ]
    monkeypatch.setattr(plan, "PACK_FROM_CHAIN_SWEEPS", 0)
    config = bv.SamplerConfig(num_chains=4, num_samples=1600, num_repeats=3, memory_limit_mb=memory_limit_mb)
    game = surprise.CoalitionSurprise(
        bv.models.LinearRegression(), NoiseAwareData.from_releases(releases), config, 4, jax.random.key(0), 63
    )
    every = list(range(1, 64))
    of_size = {size: [code for code in every if code.bit_count() == size] for size in range(1, 7)}
    assert {width: game.layout.coalitions_of_width(width) for width in (2, 4, 6)} == {2: 21, 4: 35, 6: 7}
    # one slow coalition of 3 members: 7 x 6 party slots at width 6 against 35 x 4 at width 4
    assert game.layout.rerun_width(of_size[3][:1], every) == 6
    # eight of them: two width-6 calls' worth (2 x 7 x 6 = 84) still against 140
    assert game.layout.rerun_width(of_size[3][:8], every) == 6
    # one of a single member: 21 x 2 at width 2 ties 7 x 6 at width 6; the narrower width wins the tie
    assert game.layout.rerun_width(of_size[1][:1], every) == 2
    # only the widths of the call's own coalitions (their programs compiled) are candidates
    assert game.layout.rerun_width(of_size[3][:1], of_size[3] + of_size[4]) == 4
