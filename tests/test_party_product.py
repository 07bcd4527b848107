"""The cheap surrogate beneath the Laplace surprise (`bayesval.inference.party_product`): a coalition's posterior
the exact prior times its members' likelihoods as quadratics in theta. A single party's coalition is its own Laplace
fit exactly (its quadratic is its fit's curvature less the prior's, at its mode); at negligible noise every
coalition is near the conjugate closed form; a party whose fit failed sends no message; `LinearRegression` offers it
as its surrogate game, the control variate beyond 12 parties, and as the table of every coalition, the control up to
12 (issue 61)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval as bv
from bayesval.divergence import nig_kl
from bayesval.games.masks import coalition_masks
from bayesval.inference import party_product
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import laplace_surprises, theta_prior_potential
from bayesval.models import linear_regression

MODEL = bv.models.LinearRegression()
PRIORS, STATISTIC = MODEL.priors(2), MODEL.statistic(2)


def data_of(syn, epsilon, seed):
    parties = [
        bv.Party(X, y, epsilon=epsilon, bounds=syn.bounds, name=f"p{i}", noise_seed=seed + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    return parties, NoiseAwareData.from_releases([party.release(STATISTIC) for party in parties])


def messages_of(data):
    return party_product.party_messages(data, PRIORS.model, PRIORS.data, STATISTIC)


def surprises(messages, masks):
    fit = party_product.product_surprises(messages, PRIORS.model, jnp.asarray(masks))
    assert (np.asarray(fit.gradient) <= 1e-6).all()  # every coalition's Newton steps converged
    return np.asarray(fit.surprise)


def test_a_single_party_is_its_own_laplace_fit_and_larger_coalitions_track_the_fits(syn):
    _, data = data_of(syn, 0.5, 40)
    messages = messages_of(data)
    assert (np.linalg.eigvalsh(np.asarray(messages.precisions)) >= -1e-9).all()
    masks = coalition_masks(3)
    fit = laplace_surprises(data, masks, PRIORS.model, PRIORS.data, STATISTIC)
    product = surprises(messages, masks)
    single = masks.sum(axis=1) == 1
    # each party's own fit, among the coalitions' (fitted one after another: as they would be alone, and one program)
    alone_mode, alone_cov = np.asarray(fit.mode)[single], np.asarray(fit.cov)[single]
    curvature = [jax.hessian(theta_prior_potential, argnums=1)(PRIORS.model, mode) for mode in alone_mode]
    likelihood = np.linalg.eigvalsh(np.linalg.inv(alone_cov) - np.asarray(curvature))
    exact = (likelihood >= 0).all(axis=1)  # a quadratic kept as it is: the fit exactly; one projected: close
    assert exact.sum() >= 2
    np.testing.assert_allclose(product[single][exact], np.asarray(fit.surprise)[single][exact], rtol=1e-6)
    np.testing.assert_allclose(product[single], np.asarray(fit.surprise)[single], rtol=1e-3)
    assert np.all(np.diff(product[[0, 2, 6]]) > 0)  # {0}, {0, 1}, {0, 1, 2}: more data, more surprise
    assert np.abs(product - np.asarray(fit.surprise)).max() < 0.25 * np.asarray(fit.surprise).max()


def test_at_negligible_noise_every_coalition_is_near_the_conjugate_closed_form(syn):
    """At epsilon = 1e7 the posterior is the exact statistics' NIG posterior; the prior times the members'
    quadratic likelihoods in (w, log sigma^2) approximates it. Allowed: 5 % for a party alone (its Laplace fit's own
    error), 3 % for larger coalitions."""
    parties, data = data_of(syn, 1e7, 50)
    masks = coalition_masks(3)
    product = surprises(messages_of(data), masks)
    for mask, value in zip(masks, product):
        members = [p for p, member in zip(parties, mask) if member]
        statistic = sum(p.exact_statistic() for p in members)
        exact = nig_kl(MODEL.exact_posterior(statistic, sum(len(p.X) for p in members), 2), PRIORS.model)
        assert value == pytest.approx(exact, rel=0.05 if mask.sum() == 1 else 0.03), (mask, exact)


def test_a_party_whose_fit_failed_sends_no_message(syn, monkeypatch):
    _, data = data_of(syn, 0.5, 40)
    monkeypatch.setattr(party_product, "CONVERGED", -1.0)  # every fit counts as failed
    messages = messages_of(data)
    assert not np.asarray(messages.precisions).any() and not np.asarray(messages.shifts).any()
    values = surprises(messages, coalition_masks(3))
    np.testing.assert_allclose(values, values[0])  # every coalition is the prior's own Laplace approximation


def test_linear_regression_offers_it_as_its_surrogate_game(syn):
    """The surrogate game beyond 12 parties is the party product, 0 for the empty coalition, flagged usable; None
    with a shared data model, which the parties' fits do not model."""
    _, data = data_of(syn, 0.5, 40)
    game = MODEL.surrogate_game(data)
    masks = coalition_masks(3, include_empty=True)
    given = game(masks)
    assert given.values[0] == 0.0 and given.usable.all()
    np.testing.assert_allclose(given.values[1:], surprises(messages_of(data), masks[1:]), rtol=1e-12)
    assert bv.models.LinearRegression(shared_data_model=True).surrogate_game(data) is None


def test_linear_regression_tables_it_for_every_coalition_as_its_surrogate_surprises(syn, monkeypatch):
    """The control up to 12 parties is the same surrogate over every coalition in code order, named in the result's
    method; coalitions whose steps did not converge are named and kept as they are (a control needs only be a fixed
    function of the coalition)."""
    _, data = data_of(syn, 0.5, 40)
    table = MODEL.surrogate_surprises(data)
    masks = coalition_masks(3, include_empty=True)
    assert table.values.shape == (8,) and table.values[0] == 0.0 and table.name == "the party product"
    assert len(table.unconverged) == 0
    np.testing.assert_array_equal(table.values, MODEL.surrogate_game(data)(masks).values)
    monkeypatch.setattr(linear_regression, "CONVERGED", -1.0)  # no coalition's steps count as converged
    failed = MODEL.surrogate_surprises(data)
    np.testing.assert_array_equal(failed.unconverged, np.arange(1, 8))
    np.testing.assert_array_equal(failed.values, table.values)
    assert bv.models.LinearRegression(shared_data_model=True).surrogate_surprises(data) is None
