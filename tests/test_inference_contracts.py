"""The contracts between models and samplers: the `PartyModel` protocol, the Gibbs kernel's pure init / step on
NamedTuples, both drivers returning `CoalitionDraws`, and the kernel settings that moved from `SamplerConfig`
to the models (forwarded for one release with a DeprecationWarning)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import bayesval as bv
from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import CoalitionDraws, NoiseAwareData
from bayesval.inference.nuts import NUTSSettings
from bayesval.models import PartyModel, check_party_model, is_party_model


def _mean_model(data, mask):
    mean = numpyro.sample("mean", dist.Normal(0.0, 1.0))
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.sample("perturbed", dist.Normal(data.counts * mean, data.noise_std), obs=data.perturbed[:, 0])


def _tiny_logistic_data(num_parties=2):
    """Releases of a 2-feature logistic statistic: 6 unconstrained coordinates, so chains start from prior draws."""
    size = bv.models.LogisticRegression().statistic(2).size
    return NoiseAwareData(jnp.ones((num_parties, size)), jnp.full(num_parties, 50.0), jnp.full(num_parties, 2.0))


def _tiny_data(num_parties=2):
    model = bv.models.LinearRegression()
    size = model.statistic(1).size
    return NoiseAwareData(jnp.ones((num_parties, size)), jnp.full(num_parties, 50.0), jnp.full(num_parties, 2.0))


@pytest.mark.parametrize(
    "model",
    [bv.models.LinearRegression(), bv.models.LogisticRegression(), bv.models.NumPyroModel(_mean_model, ["mean"])],
    ids=["linear", "logistic", "numpyro"],
)
def test_the_models_keep_the_party_model_protocol(model):
    assert isinstance(model, PartyModel) and is_party_model(model)
    check_party_model(model)


def test_an_object_without_the_members_is_refused_with_their_names():
    class Half:
        name, sampler = "half", "nuts"

        def statistic(self, num_features):
            return None

    assert not is_party_model(Half())
    with pytest.raises(TypeError, match=r"lacks \['prior_draws', 'posterior_draws'\]"):
        check_party_model(Half())


def test_sampler_config_leaves_kernel_settings_to_the_model_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = SamplerConfig(num_chains=2)
        paper = SamplerConfig.preset("paper", "nuts").with_(num_chains=2)
    assert config.kernel_overrides == {}
    assert vars(config)["target_accept_prob"] == 0.8 and "target_accept_prob=0.8," in repr(config)
    assert config == SamplerConfig(num_chains=2)
    model = bv.models.LogisticRegression(max_tree_depth=4, min_bfmi=0.2)
    # the model's own target; its start (warm_start None) is decided by the releases, which are not given here
    assert config.overriding(model.kernel_settings(None)) == NUTSSettings(0.65, 4, 0.2, None)
    with pytest.warns(DeprecationWarning, match=r"'paper' preset sets the NUTS kernel's target_accept_prob 0.86 over"):
        assert paper.overriding(model.kernel_settings(None)) == NUTSSettings(0.86, 4, 0.2, None)  # for one release
    paper_kernel = bv.models.LogisticRegression(target_accept_prob=0.86)  # the paper's kernel, on the model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert paper.overriding(paper_kernel.kernel_settings(None)) == paper_kernel.kernel


def test_a_config_is_a_run_budget_and_a_valuation_policy_and_holds_no_kernel_setting_of_its_own():
    """Every field of `SamplerConfig` is in exactly one of `RunBudget` (what a sampler call reads), `ValuationPolicy`
    (what the party valuation reads) and the deprecated kernel fields; a rerun changes the budget's sweeps and
    thinning, a sampled game the policy's repeats."""
    from dataclasses import fields

    from bayesval.inference.config import KERNEL_FIELDS, RunBudget, ValuationPolicy

    parts = [RunBudget._fields, ValuationPolicy._fields, KERNEL_FIELDS]
    assert sorted(name for part in parts for name in part) == sorted(field.name for field in fields(SamplerConfig))
    config = SamplerConfig.preset("fast").with_(num_chains=2, memory_limit_mb=512.0, reruns=2)
    assert config.budget == RunBudget(2, 800, 1600, 1, 512.0) and config.policy == ValuationPolicy(3, 2, 2, True)
    rerun = config.rerun(2)
    assert rerun.budget == config.budget._replace(num_samples=6400, thinning=4)
    assert rerun.policy == config.policy._replace(reruns=0)
    assert config.for_sampled_game().policy.num_repeats == 2 and config.for_sampled_game().budget == config.budget
    nuts = SamplerConfig.preset("fast", "nuts")  # where chains start warm, the policy's warm budget replaces the sweeps
    assert nuts.policy[-2:] == (100, 325) and nuts.for_start(True).budget == nuts.budget._replace(
        num_warmup=100, num_samples=325
    )
    assert nuts.for_start(False).budget == nuts.budget and nuts.for_start(False).policy[-2:] == (None, None)
    # a rerun keeps the draws per chain from either start: twice the sweeps, thinned twice as much
    assert nuts.rerun(1).for_start(True).budget == nuts.for_start(True).rerun(1).budget
    assert nuts.rerun(1).for_start(True).num_samples == 650 and nuts.rerun(1).thinning == 2


def test_kernel_settings_passed_to_sampler_config_warn_and_are_forwarded():
    with pytest.warns(DeprecationWarning, match="kernel settings belong to the model"):
        config = SamplerConfig(target_accept_prob=0.9, min_bfmi=0.1)
    assert config.kernel_overrides == {"target_accept_prob": 0.9, "min_bfmi": 0.1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy = config.with_(num_chains=2)  # named once already: no second warning for a copy
    assert copy.kernel_overrides == config.kernel_overrides
    with pytest.warns(DeprecationWarning):
        SamplerConfig().with_(min_bfmi=0.5)
    model = bv.models.NumPyroModel(_mean_model, ["mean"], target_accept_prob=0.7)
    assert model.kernel == NUTSSettings(0.7, 10, 0.3)
    assert config.overriding(model.kernel_settings(_tiny_data())) == NUTSSettings(0.9, 10, 0.1)


def test_kernel_settings_have_one_signature_and_the_old_calls_warn_for_one_release():
    """kernel_settings(data) for every model; LinearRegression's kernel_settings(num_features), NumPyroModel's
    kernel_settings(config) and a user model written with either still give what they gave, with a warning."""
    from bayesval.models.protocol import capabilities

    gibbs, logistic, data = bv.models.LinearRegression(collapsed_moves=3), bv.models.LogisticRegression(), _tiny_data()
    with pytest.warns(DeprecationWarning, match=r"kernel_settings\(num_features\) is deprecated"):
        assert gibbs.kernel_settings(1) == gibbs.kernel_settings(data)
    assert gibbs.kernel_settings(data).statistic.size == data.perturbed.shape[1]
    with pytest.warns(DeprecationWarning, match="kernel settings belong to the model"):
        config = SamplerConfig(target_accept_prob=0.9)
    with pytest.warns(DeprecationWarning, match=r"kernel_settings\(config\) is deprecated"):
        assert logistic.kernel_settings(config) == NUTSSettings(0.9, 3, 0.3, None)  # the start: from the releases
    assert logistic.kernel_settings(_tiny_logistic_data()) == NUTSSettings(0.65, 3, 0.3, warm_start=False)

    class OldNUTS:  # a user model written against the old NUTS signature
        name, sampler = "old", "nuts"
        statistic = prior_draws = posterior_draws = staticmethod(lambda *args: None)

        def kernel_settings(self, config):
            return NUTSSettings(0.7, 5, 0.1)._replace(**config.kernel_overrides)

    class OldGibbs(OldNUTS):
        def kernel_settings(self, num_features):
            return gibbs.kernel_settings(num_features)

    with pytest.warns(DeprecationWarning, match=r"OldNUTS.kernel_settings\(config\) has the signature"):
        assert capabilities(OldNUTS()).kernel_settings(data) == NUTSSettings(0.7, 5, 0.1)
    with pytest.warns(DeprecationWarning, match=r"OldGibbs.kernel_settings\(num_features\) has the signature"):
        assert capabilities(OldGibbs()).kernel_settings is None


@pytest.mark.parametrize(("field", "value"), [("target_accept_prob", 1.0), ("min_bfmi", -1.0)])
def test_model_kernel_settings_are_checked(field, value):
    with pytest.raises(ValueError, match=field):
        bv.models.NumPyroModel(_mean_model, ["mean"], **{field: value})


def test_gibbs_step_is_a_pure_function_of_its_named_inputs():
    from bayesval.inference.gibbs import GibbsInputs, init, step

    model, data = bv.models.LinearRegression(collapsed_moves=0), _tiny_data()
    priors, settings = model.priors(1), model.kernel_settings(data)
    state = init(jax.random.key(0), priors, 2)
    inputs = GibbsInputs(data, jnp.array([True, False]), priors)
    one, two = (step(jax.random.key(1), state, inputs, settings) for _ in range(2))
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)):
        np.testing.assert_array_equal(a, b)
    assert one.theta.shape == (3,) and float(one.noise_var) > 0


def test_gibbs_driver_returns_coalition_draws_and_takes_settings_either_way():
    from bayesval.inference.gibbs import sample_coalition_posteriors

    model, data = bv.models.LinearRegression(collapsed_moves=0), _tiny_data()
    masks = np.array([[True, False], [True, True]])
    budget = dict(num_chains=2, num_warmup=4, num_samples=6, thinning=2, progress_bar=False)
    priors, settings = model.priors(1), model.kernel_settings(data)
    draws = sample_coalition_posteriors(jax.random.key(2), data, masks, priors, settings, **budget)
    legacy = sample_coalition_posteriors(
        jax.random.key(2), data, masks, priors, settings.statistic, collapsed_moves=0, **budget
    )
    assert isinstance(draws, CoalitionDraws) and draws.draws.shape == (2, 2, 3, 3) and draws.kept_chains.all()
    np.testing.assert_array_equal(draws.draws, legacy.draws)


def test_a_models_capabilities_are_read_once_into_one_record():
    """`capabilities(model)`: each optional member bound where the model has it, None (packs_members False) where
    it does not; the NUTS kernel settings a run uses only for a model that owns a NUTS kernel."""
    from bayesval.models.protocol import OPTIONAL_MEMBERS, Capabilities, capabilities

    gibbs = capabilities(bv.models.LinearRegression())
    assert gibbs.packs_members and gibbs.conjugate_prior is not None
    assert gibbs.kernel_settings(_tiny_data()).collapsed_moves == 8  # one signature: kernel_settings(data)
    assert gibbs.surrogate_surprises is not None and gibbs.prior_log_density is not None
    logistic = bv.models.LogisticRegression()
    nuts = capabilities(logistic)
    assert not nuts.packs_members and nuts.conjugate_prior is None and nuts.check is not None
    assert nuts.kernel_settings(_tiny_logistic_data()) == logistic.kernel._replace(warm_start=False)  # 6 coordinates

    class Bare:  # the required members only
        name, sampler = "bare", "nuts"
        statistic = prior_draws = posterior_draws = staticmethod(lambda *args: None)

    bare = capabilities(Bare())
    assert bare == Capabilities(*[False if name == "packs_members" else None for name in OPTIONAL_MEMBERS])
    with pytest.raises(TypeError, match="lacks \\['posterior_draws'\\]"):
        capabilities(type("Half", (), {"name": "half", "sampler": "nuts", "statistic": 0, "prior_draws": 0})())


@pytest.mark.parametrize("preset", ["fast", "paper"])
def test_a_saved_result_records_the_kernel_settings_that_ran(preset, monkeypatch, tmp_path):
    """`diagnostics["sampler"]` (`sampler_record`), saved and loaded, holds the target acceptance and BFMI floor that
    the NUTS driver is handed: a LogisticRegression run records its own 0.65 at the fast preset (it recorded the
    config's unused 0.8 before), and the paper preset's 0.86 (set over the model's for one release, with a
    warning); a Gibbs model's record keeps the config's fields."""
    from bayesval.models import numpyro_model
    from bayesval.parties.surprise import CoalitionSurprise
    from bayesval.parties.valuation import sampler_record

    handed = {}
    monkeypatch.setattr(
        numpyro_model, "sample_coalition_posteriors_nuts", lambda *args, **kwargs: handed.update(kwargs)
    )
    logistic = bv.models.LogisticRegression()
    config = SamplerConfig.preset(preset, "nuts")
    size = logistic.statistic(2).size
    data = NoiseAwareData(jnp.ones((3, size)), jnp.full(3, 50.0), jnp.full(3, 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the paper preset's target acceptance, for one release
        logistic.posterior_draws(jax.random.key(0), data, np.ones((1, 3), bool), config)  # what the driver gets
        record = sampler_record(CoalitionSurprise(logistic, data, config, 4, jax.random.key(0), 7))
    result = bv.ValuationResult("nuts", np.zeros(3), np.zeros(3), ["a", "b", "c"], diagnostics={"sampler": record})
    saved = bv.ValuationResult.load(result.save(tmp_path / "result.npz")).diagnostics["sampler"]
    assert saved["target_accept_prob"] == handed["target_accept_prob"] == {"fast": 0.65, "paper": 0.86}[preset]
    assert saved["min_bfmi"] == handed["min_bfmi"] == logistic.kernel.min_bfmi
    assert saved["num_chains"] == handed["num_chains"] == config.num_chains
    gibbs = sampler_record(
        CoalitionSurprise(bv.models.LinearRegression(), _tiny_data(3), SamplerConfig(), 4, jax.random.key(0), 7)
    )
    assert gibbs == vars(SamplerConfig())
