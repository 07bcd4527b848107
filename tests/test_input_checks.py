"""Every argument check refuses real bad values with a clear error of the right type, naming the argument,
raised from bayesval's own code rather than from deep inside numpy or JAX (DESIGN.md Sec. 6)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import bayesval as bv
from bayesval.estimators.knn.distances import check_distance, check_tau, prepare_features
from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.statistics import LinearRegressionStatistic, LogisticRegressionStatistic
from bayesval.validation import (
    check_bool,
    check_finite_array,
    check_int,
    check_key,
    check_labels,
    check_non_negative,
    check_positive,
    check_probability,
    check_real,
    row_norms,
)

OWN_DIRS = {Path(module.__file__).parent for module in (bv, bv.models)}
OWN_DIRS |= {directory.resolve() for directory in OWN_DIRS}


def refused(error: type[Exception], name: str, call, /, *args, **kwargs) -> Exception:
    """`call(*args, **kwargs)` raises `error`, whose message names `name`, from bayesval's own code."""
    with pytest.raises(error) as excinfo:
        call(*args, **kwargs)
    assert name in str(excinfo.value), (name, str(excinfo.value))
    raised_in = Path(str(excinfo.traceback[-1].path))
    assert any(path.is_relative_to(directory) for path in (raised_in, raised_in.resolve()) for directory in OWN_DIRS), (
        f"{error.__name__} raised from {raised_in}, not from bayesval"
    )
    return excinfo.value


# --- scalar checks ---------------------------------------------------------------------------------

NOT_NUMBERS = [True, False, np.bool_(True), "1.0", None, [1.0], np.array([1.0]), 1 + 2j, object()]
NON_FINITE = [math.nan, math.inf, -math.inf, np.float64("nan"), pytest.param(10**400, id="10**400")]


@pytest.mark.parametrize("value", NOT_NUMBERS)
@pytest.mark.parametrize("check", [check_real, check_positive, check_non_negative, check_probability])
def test_numbers_refuse_what_is_not_a_number(check, value):
    message = str(refused(TypeError, "the_arg", check, "the_arg", value))
    assert "must be a number" in message and type(value).__name__ in message


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("check", [check_real, check_positive, check_non_negative, check_probability])
def test_numbers_refuse_non_finite_values(check, value):
    refused(ValueError, "the_arg", check, "the_arg", value)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (check_positive, 0),
        (check_positive, -1e-300),
        (check_positive, 0.0),
        (check_non_negative, -1e-12),
        (check_probability, 0),
        (check_probability, 1),
        (check_probability, 1.5),
        (check_probability, -0.1),
    ],
)
def test_numbers_refuse_values_out_of_range(check, value):
    refused(ValueError, "the_arg", check, "the_arg", value)


@pytest.mark.parametrize("value", [3, 2.5, 1e-300, np.float32(0.5), np.int64(7), np.array(1.5), jnp.asarray(2.0)])
def test_numbers_accept_python_and_numpy_scalars(value):
    for check in (check_real, check_positive, check_non_negative):
        result = check("x", value)
        assert type(result) is float and result == float(value)


def test_probability_accepts_numpy_scalars():
    assert check_probability("delta", np.float32(0.25)) == 0.25


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (3.0, TypeError),
        (np.float64(3.0), TypeError),
        (2.5, TypeError),
        (True, TypeError),
        (np.bool_(False), TypeError),
        ("3", TypeError),
        (None, TypeError),
        (math.nan, TypeError),
        (np.array([3]), TypeError),
        (0, ValueError),
        (-5, ValueError),
    ],
)
def test_int_refuses_floats_bools_strings_and_small_values(value, error):
    message = str(refused(error, "num_things", check_int, "num_things", value, minimum=1))
    assert "an integer >= 1" in message


def test_int_says_how_to_write_an_integral_float():
    assert "write 3" in str(refused(TypeError, "count", check_int, "count", 3.0))
    assert "an integer in [1, 4]" in str(refused(ValueError, "count", check_int, "count", 5, minimum=1, maximum=4))


@pytest.mark.parametrize("value", [5, np.int32(5), np.int64(5), np.uint8(5), np.array(5)])
def test_int_accepts_python_and_numpy_integers(value):
    result = check_int("count", value, minimum=1)
    assert type(result) is int and result == 5


@pytest.mark.parametrize("value", [1, 0, "True", None, 1.0, np.array([True])])
def test_bool_refuses_what_is_not_a_bool(value):
    assert "True or False" in str(refused(TypeError, "flag", check_bool, "flag", value))


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.array(False)])
def test_bool_accepts_python_and_numpy_bools(value):
    assert check_bool("flag", value) is bool(value)


@pytest.mark.parametrize(
    ("key", "error"),
    [
        (True, TypeError),
        (1.0, TypeError),
        ("0", TypeError),
        (None, TypeError),
        (np.zeros(3), TypeError),
        (2**64, ValueError),
    ],
)
def test_key_refuses_what_is_not_a_seed_or_a_key(key, error):
    refused(error, "key", check_key, "key", key)


def test_key_refuses_a_batch_of_keys():
    refused(ValueError, "single jax.random.key", check_key, "key", jax.random.split(jax.random.key(0), 3))


@pytest.mark.parametrize("key", [7, np.int64(7), np.array(7), jax.random.key(7), jax.random.PRNGKey(7)])
def test_key_accepts_seeds_and_keys_with_the_same_stream(key):
    checked = check_key("key", key)
    assert jax.dtypes.issubdtype(checked.dtype, jax.dtypes.prng_key) and checked.shape == ()
    assert jax.random.normal(checked) == jax.random.normal(jax.random.key(7))


# --- arrays ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("array", "ndim", "error", "says"),
    [
        ([["a", "b"], ["c", "d"]], 2, TypeError, "strings"),
        (np.array([[1.0, None]], dtype=object), 2, TypeError, "None (NoneType) at index [0, 1]"),
        ([[1.0, 2.0], [3.0, {}]], 2, TypeError, "dict"),
        (np.ones((2, 2)) * 1j, 2, TypeError, "complex"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), 1, TypeError, "datetime64"),
        ([[1.0, 2.0], [3.0]], 2, ValueError, "different lengths"),
        (np.ones(3), 2, ValueError, "2-D array, got shape (3,)"),
        (np.ones((2, 2, 2)), 2, ValueError, "2-D array"),
        ([[1.0, np.nan]], 2, ValueError, "1 non-finite entries (first at index [0, 1])"),
        ([[np.inf, 1.0], [1.0, -np.inf]], 2, ValueError, "2 non-finite entries (first at index [0, 0])"),
        pytest.param([10**400, 1], 1, ValueError, "too large", id="int-beyond-float64"),
    ],
)
def test_finite_array_refuses_non_numbers_ragged_and_non_finite(array, ndim, error, says):
    assert says in str(refused(error, "alice: X", check_finite_array, "alice: X", array, ndim=ndim))


@pytest.mark.parametrize(
    "array", [[[1, 2], [3, 4]], np.array([[True, False], [False, True]]), np.array([[1.0, 2]], dtype=object)]
)
def test_finite_array_accepts_ints_bools_and_numeric_objects(array):
    values = check_finite_array("X", array, ndim=2)
    assert values.dtype == np.float64 and np.array_equal(values, np.asarray(array, dtype=float))


def test_row_norms_neither_overflow_nor_underflow():
    X = np.array(
        [
            [1e200, 1e200],
            [3e200, -4e200],
            [1e-200, 1e-200],
            [1e308, 1e308],
            [5e-324, 0.0],
            [0.0, 0.0],
            [3.0, 4.0],
        ]
    )
    with np.errstate(over="ignore"):
        assert np.isinf(np.linalg.norm(X[:1], axis=1)).all()  # what the naive norm gets
    expected = np.array([math.hypot(*row) for row in X])
    np.testing.assert_allclose(row_norms(X), expected, rtol=1e-15, atol=0)
    assert row_norms(X)[0] == pytest.approx(math.sqrt(2) * 1e200, rel=1e-15)
    assert row_norms(X)[2] == pytest.approx(math.sqrt(2) * 1e-200, rel=1e-15)
    assert row_norms(X)[4] == 5e-324 and row_norms(X)[5] == 0.0
    assert np.isinf(row_norms([[np.inf, 1.0]]))[0] and np.isnan(row_norms([[np.nan, 1.0]]))[0]


@pytest.mark.parametrize(
    ("labels", "n_rows", "error", "says"),
    [
        ([0.0, 1.0, np.nan, 1.0], 4, ValueError, "at index 2"),
        (np.array([1.0, np.inf]), 2, ValueError, "at index 1"),
        ([1, None, 0], 3, TypeError, "None (NoneType) at index 1"),
        ([1, "b"], 2, TypeError, "mixes strings and numbers"),
        (np.array([1 + 1j, 2]), 2, TypeError, "complex"),
        ([0, 1, 1], 4, ValueError, "one label per row of X (4 labels), got shape (3,)"),
        ([[0, 1], [1, 0]], 2, ValueError, "got shape (2, 2)"),
        ([], 0, ValueError, "empty"),
        ([[0, 1], [1]], 2, TypeError, "list"),
    ],
)
def test_labels_refuse_nan_missing_mixed_and_misshapen(labels, n_rows, error, says):
    assert says in str(refused(error, "y_val", check_labels, "y_val", labels, n_rows))


@pytest.mark.parametrize("labels", [[0, 1, 1], ["cat", "dog", "cat"], np.array([-1.0, 1.0, 1.0]), [True, False, True]])
def test_labels_accept_numbers_and_strings(labels):
    checked = check_labels("y", labels, 3)
    assert checked.shape == (3,) and checked.tolist() == list(np.asarray(labels).tolist())


# --- Bounds and sensitivities ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name", "error"),
    [
        ({"x_norm": True}, "Bounds.x_norm", TypeError),
        ({"x_norm": "1.0"}, "Bounds.x_norm", TypeError),
        ({"x_norm": None}, "Bounds.x_norm", TypeError),
        ({"x_norm": [1.0]}, "Bounds.x_norm", TypeError),
        ({"x_norm": math.nan}, "Bounds.x_norm", ValueError),
        ({"x_norm": math.inf}, "Bounds.x_norm", ValueError),
        ({"x_norm": 0.0}, "Bounds.x_norm", ValueError),
        ({"x_norm": -1}, "Bounds.x_norm", ValueError),
        ({"x_norm": 1.0, "y_abs": True}, "Bounds.y_abs", TypeError),
        ({"x_norm": 1.0, "y_abs": "4"}, "Bounds.y_abs", TypeError),
        ({"x_norm": 1.0, "y_abs": -4.0}, "Bounds.y_abs", ValueError),
        ({"x_norm": 1.0, "y_abs": math.nan}, "Bounds.y_abs", ValueError),
    ],
)
def test_bounds_refuse_bad_values(kwargs, name, error):
    refused(error, name, bv.Bounds, **kwargs)


def test_bounds_accept_numpy_scalars_as_floats():
    bounds = bv.Bounds(np.float32(2.0), np.int64(3))
    assert type(bounds.x_norm) is float and type(bounds.y_abs) is float
    assert bounds == bv.Bounds(2.0, 3.0)


@pytest.mark.parametrize(
    ("statistic", "bounds"),
    [
        (LinearRegressionStatistic(2), bv.Bounds(1e300, 1.0)),
        (LinearRegressionStatistic(2), bv.Bounds(1.0, 1e300)),
        (LinearRegressionStatistic(2), bv.Bounds(1e160, 1e160)),
        (LogisticRegressionStatistic(2), bv.Bounds(1e300)),
        (LogisticRegressionStatistic(3), bv.Bounds(1e155, 1.0)),
    ],
)
def test_sensitivity_of_huge_bounds_is_a_clear_error(statistic, bounds):
    message = str(refused(ValueError, "Bounds(x_norm=", statistic.sensitivity, bounds))
    assert "too large to calibrate noise for" in message


def test_sensitivity_of_large_bounds_is_finite_and_ordinary_bounds_unchanged():
    # the sensitivity grows like sqrt(2) r^2 for a large x bound and Y^2 for a large y bound; both stay representable
    assert LinearRegressionStatistic(2).sensitivity(bv.Bounds(1e100, 1.0)) == pytest.approx(math.sqrt(2) * 1e200)
    assert LinearRegressionStatistic(2).sensitivity(bv.Bounds(1.0, 1e100)) == pytest.approx(1e200, rel=1e-9)
    assert LogisticRegressionStatistic(2).sensitivity(bv.Bounds(1e100)) == pytest.approx(math.sqrt(2) * 1e200)
    # the logistic statistic ignores the y bound (y = +-1), however large
    logistic = LogisticRegressionStatistic(2)
    assert logistic.sensitivity(bv.Bounds(1.5, 1e300)) == logistic.sensitivity(bv.Bounds(1.5))
    # bounds of ordinary size get the closed form (logistic) and the maximum of docs/sensitivity.md's quartic in
    # p = y y' (linear), here evaluated on a dense grid of p: the exact maximum is at or just above the grid's
    for x_norm, y_abs in [(1.0, 4.0), (3.7, 0.2), (1e40, 2.0)]:
        r2, y2 = x_norm**2, y_abs**2
        bounds = bv.Bounds(x_norm, y_abs)
        assert logistic.sensitivity(bounds) == pytest.approx(math.sqrt(2 * r2**2 + 4 * r2 + 4), rel=1e-15)
        if x_norm > 1e10:
            continue  # the grid's arithmetic would overflow; the scaled code is checked above
        p = np.linspace(-y2, y2, 200_001)
        k = 1 + p
        h = np.where(np.abs(k) <= r2, k**2, 2 * r2 * np.abs(k) - r2**2)
        bound = 2 * r2**2 + h + r2 * (2 + y2 + p**2 / y2) + (y2 + p**2 / y2 - 2 * p) + (y2 - p**2 / y2) ** 2
        claimed = LinearRegressionStatistic(3).sensitivity(bounds)
        assert math.sqrt(bound.max()) <= claimed <= math.sqrt(bound.max()) * (1 + 1e-8)


# --- SamplerConfig -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("num_chains", 0, ValueError),
        ("num_chains", 2.0, TypeError),
        ("num_chains", True, TypeError),
        ("num_chains", "4", TypeError),
        ("num_warmup", -1, ValueError),
        ("num_warmup", 100.0, TypeError),
        ("num_warmup", None, TypeError),
        ("num_samples", 0, ValueError),
        ("num_samples", 1e3, TypeError),
        ("thinning", 0, ValueError),
        ("thinning", 1.5, TypeError),
        ("num_repeats", 1, ValueError),
        ("num_repeats", 0, ValueError),
        ("num_repeats", 3.0, TypeError),
        ("progress_bar", 1, TypeError),
        ("progress_bar", "no", TypeError),
        ("progress_bar", None, TypeError),
        ("target_accept_prob", 0.0, ValueError),
        ("target_accept_prob", 1.0, ValueError),
        ("target_accept_prob", 1.2, ValueError),
        ("target_accept_prob", math.nan, ValueError),
        ("target_accept_prob", True, TypeError),
        ("target_accept_prob", "0.8", TypeError),
        ("min_bfmi", -0.1, ValueError),
        ("min_bfmi", math.nan, ValueError),
        ("min_bfmi", math.inf, ValueError),
        ("min_bfmi", None, TypeError),
        ("min_bfmi", True, TypeError),
    ],
)
def test_sampler_config_checks_every_field(field, value, error):
    refused(error, f"SamplerConfig.{field}", SamplerConfig, **{field: value})
    refused(error, f"SamplerConfig.{field}", SamplerConfig().with_, **{field: value})


def test_one_repeat_is_refused_because_it_has_no_stderr():
    assert ">= 2" in str(refused(ValueError, "SamplerConfig.num_repeats", SamplerConfig, num_repeats=1))


def test_sampler_config_num_samples_multiple_of_thinning():
    refused(ValueError, "multiple of thinning", SamplerConfig, num_samples=10, thinning=3)


def test_sampler_config_stores_numpy_scalars_as_python_types():
    config = SamplerConfig(
        num_chains=np.int64(2), num_samples=np.int32(90), thinning=np.int64(3), progress_bar=np.bool_(False)
    )
    assert type(config.num_chains) is int and type(config.num_samples) is int and config.progress_bar is False
    assert config.draws_per_repeat == 60


def test_with_refuses_unknown_fields_and_lists_the_valid_ones():
    message = str(refused(TypeError, "num_sample", SamplerConfig().with_, num_sample=100))
    assert "did you mean 'num_samples'" in message and "num_warmup" in message and "min_bfmi" in message


@pytest.mark.parametrize(("args", "name"), [((None,), "name"), ((1,), "name"), (("fast", 2), "sampler")])
def test_preset_refuses_non_string_names(args, name):
    assert "must be a string" in str(refused(TypeError, name, SamplerConfig.preset, *args))


def test_preset_refuses_unknown_names():
    refused(ValueError, "unknown preset 'slow'", SamplerConfig.preset, "slow")
    refused(ValueError, "unknown sampler 'hmc'", SamplerConfig.preset, "fast", "hmc")


# --- distances ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tau", "error"), [(True, TypeError), ("0.5", TypeError), (None, TypeError), (-2, ValueError)])
def test_tau_refuses_bools_strings_and_out_of_range(tau, error):
    refused(error, "tau", check_tau, tau, "cosine")


def test_tau_accepts_numpy_scalars():
    assert check_tau(np.float32(-0.5), "cosine") == -0.5 and check_tau(np.int64(2), "euclidean") == 2.0


@pytest.mark.parametrize("distance", [None, 1, ["cosine"], np.array("cosine"), b"cosine"])
def test_distance_must_be_a_string(distance):
    assert "cosine" in str(refused(TypeError, "distance", check_distance, distance))


def test_distance_accepts_numpy_strings():
    assert check_distance(np.str_("euclidean")) == "euclidean"


def test_cosine_normalisation_keeps_the_direction_of_huge_and_tiny_rows():
    X = np.array([[1e200, 1e200], [3e200, -4e200], [1e-200, 1e-200], [5e-324, 5e-324], [2.0, 0.0]])
    unit = prepare_features("X", X, "cosine")
    s = math.sqrt(0.5)
    np.testing.assert_allclose(unit, [[s, s], [0.6, -0.8], [s, s], [s, s], [1.0, 0.0]], rtol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-15)
    refused(ValueError, "X_val has 1 all-zero rows", prepare_features, "X_val", np.array([[1.0, 0], [0, 0]]), "cosine")


def test_euclidean_refuses_rows_whose_squared_distances_overflow():
    assert "rescale" in str(refused(ValueError, "X", prepare_features, "X", np.array([[1e200, 0.0]]), "euclidean"))
    ordinary = np.array([[1e100, 0.0], [1.0, 2.0]])
    assert prepare_features("X", ordinary, "euclidean") is not None


# --- NumPyroModel ------------------------------------------------------------------------------------

DATA = NoiseAwareData(jnp.array([[3.0], [10.0], [-2.0]]), jnp.array([4.0, 12.0, 5.0]), jnp.array([1.0, 2.0, 0.5]))


def gaussian_mean(data, mask):
    mean = numpyro.sample("mean", dist.Normal(0.0, 10.0))
    spread = jnp.sqrt(data.counts + data.noise_std**2)
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.sample("perturbed", dist.Normal(data.counts * mean, spread), obs=data.perturbed[:, 0])


def factor_likelihood(data, mask):
    """A likelihood written as a factor, inside the masked parties plate: fine."""
    mean = numpyro.sample("mean", dist.Normal(0.0, 10.0))
    spread = jnp.sqrt(data.counts + data.noise_std**2)
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.factor("loglik", dist.Normal(data.counts * mean, spread).log_prob(data.perturbed[:, 0]))


def factor_truncated_prior(data, mask):
    """A prior truncated to mean > 0 by a factor: forward sampling ignores it."""
    mean = numpyro.sample("mean", dist.Normal(0.0, 10.0))
    numpyro.factor("positive", jnp.where(mean > 0, 0.0, -jnp.inf))
    gaussian_likelihood(data, mask, mean)


def gaussian_likelihood(data, mask, mean):
    spread = jnp.sqrt(data.counts + data.noise_std**2)
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.sample("perturbed", dist.Normal(data.counts * mean, spread), obs=data.perturbed[:, 0])


def unmasked_likelihood(data, mask):
    mean = numpyro.sample("mean", dist.Normal(0.0, 10.0))
    with numpyro.plate("parties", data.counts.shape[0]):
        numpyro.sample("perturbed", dist.Normal(data.counts * mean, 1.0), obs=data.perturbed[:, 0])


def broken(data, mask):
    numpyro.sample("mean", dist.Normal(0.0, 10.0))
    return data.perturbed @ jnp.ones(5)


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"model_fn": "gaussian_mean"}, TypeError, "model_fn must be a NumPyro model function"),
        ({"model_fn": None}, TypeError, "model_fn"),
        ({"parameters": "mean"}, TypeError, "bare string 'mean'"),
        ({"parameters": []}, ValueError, "parameters must name at least one sample site"),
        ({"parameters": ["mean", "mean"]}, ValueError, "parameters name ['mean'] more than once"),
        ({"parameters": ["mean", ""]}, ValueError, "parameters has an empty site name"),
        ({"parameters": ["mean", 1]}, TypeError, "parameters must be site names"),
        ({"parameters": {"mean"}}, TypeError, "parameters must be a list or tuple"),
        ({"parameters": None}, TypeError, "parameters must be a list or tuple"),
        ({"name": 3}, TypeError, "name must be a string"),
        ({"max_tree_depth": 0}, ValueError, "max_tree_depth must be an integer >= 1"),
        ({"max_tree_depth": 10.0}, TypeError, "max_tree_depth"),
        ({"max_tree_depth": True}, TypeError, "max_tree_depth"),
        ({"max_tree_depth": "10"}, TypeError, "max_tree_depth"),
        ({"statistic": "sum"}, TypeError, "statistic must be None"),
    ],
)
def test_numpyro_model_refuses_bad_arguments(kwargs, error, says):
    arguments = {"model_fn": gaussian_mean, "parameters": ["mean"], "name": "Gaussian mean"} | kwargs
    refused(error, says, bv.models.NumPyroModel, **arguments)


def test_numpyro_model_accepts_any_ordered_sequence_of_names():
    assert bv.models.NumPyroModel(gaussian_mean, np.array(["mean"])).parameters == ("mean",)
    assert bv.models.NumPyroModel(gaussian_mean, ("mean",), max_tree_depth=np.int64(8)).max_tree_depth == 8


def test_check_accepts_masked_likelihoods_sample_or_factor():
    assert bv.models.NumPyroModel(gaussian_mean, ["mean"]).check(DATA) is None
    assert bv.models.NumPyroModel(factor_likelihood, ["mean"]).check(DATA) is None


def test_check_refuses_a_factor_truncated_prior():
    model = bv.models.NumPyroModel(factor_truncated_prior, ["mean"], name="truncated mean")
    message = str(refused(ValueError, "truncated mean", model.check, DATA))
    assert "numpyro.factor site 'positive'" in message
    assert "forward-sampling" in message and "NormTruncatedNormal" in message


def test_check_refuses_a_misspelled_parameter_at_once():
    bv.models.NumPyroModel(gaussian_mean, ["mean"]).check(DATA)  # warm-up: jax's first op dispatches
    model = bv.models.NumPyroModel(gaussian_mean, ["maen"], name="Gaussian mean")
    start = time.perf_counter()
    message = str(refused(ValueError, "'maen'", model.check, DATA))
    assert time.perf_counter() - start < 0.5
    assert "Gaussian mean" in message and "['mean']" in message


def test_check_refuses_observed_parameters_and_unmasked_likelihoods():
    observed = bv.models.NumPyroModel(gaussian_mean, ["mean", "perturbed"])
    refused(ValueError, "'perturbed' is an observed site", observed.check, DATA)
    unmasked = bv.models.NumPyroModel(unmasked_likelihood, ["mean"])
    assert "handlers.mask(mask=mask)" in str(refused(ValueError, "'perturbed'", unmasked.check, DATA))


def test_check_reports_an_exception_of_the_model_as_a_value_error():
    model = bv.models.NumPyroModel(broken, ["mean"], name="broken model")
    error = refused(ValueError, "broken model", model.check, DATA)
    assert "raised TypeError" in str(error) and "dot_general" in str(error)
    assert isinstance(error.__cause__, TypeError)


# --- LinearRegression / LogisticRegression -----------------------------------------------------------


def _released(statistic, num_features: int, seed: int = 0) -> NoiseAwareData:
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(60, num_features)), rng.integers(0, 2, 60).astype(float)
    perturbed = np.stack([statistic.compute(X[i::3], y[i::3]) for i in range(3)])
    return NoiseAwareData(jnp.asarray(perturbed), jnp.array([20.0, 20.0, 20.0]), jnp.array([0.5, 1.0, 2.0]))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"prior": "syn"}, TypeError),
        ({"prior": bv.models.syn_data_prior(2)}, TypeError),
        ({"data_prior": bv.models.syn_model_prior(2)}, TypeError),
        ({"shared_data_model": 1}, TypeError),
        ({"shared_data_model": "yes"}, TypeError),
        ({"interweaving_moves": -1}, ValueError),
        ({"interweaving_moves": 1.5}, TypeError),
        ({"collapsed_moves": True}, TypeError),
        ({"collapsed_moves": "8"}, TypeError),
    ],
)
def test_linear_regression_refuses_bad_fields(kwargs, error):
    refused(error, f"LinearRegression.{next(iter(kwargs))}", bv.models.LinearRegression, **kwargs)


def test_linear_regression_check():
    data = _released(LinearRegressionStatistic(2), 2)
    assert bv.models.LinearRegression().check(data) is None
    matching = bv.models.LinearRegression(prior=bv.models.syn_model_prior(2), data_prior=bv.models.syn_data_prior(2))
    assert matching.check(data) is None
    wrong_length = data._replace(perturbed=data.perturbed[:, :8])
    assert "(5, 9, 14, 20, ...)" in str(
        refused(ValueError, "not a linear-regression statistic", bv.models.LinearRegression().check, wrong_length)
    )
    model = bv.models.LinearRegression(prior=bv.models.syn_model_prior(3))
    message = str(refused(ValueError, "LinearRegression.prior.mean", model.check, data))
    assert "2 features" in message and "(3,)" in message
    model = bv.models.LinearRegression(data_prior=bv.models.syn_data_prior(1))
    refused(ValueError, "LinearRegression.data_prior.mean", model.check, data)


@pytest.mark.parametrize(
    ("kwargs", "name", "error"),
    [
        ({"max_sq_norm": 0.0}, "max_sq_norm", ValueError),
        ({"max_sq_norm": -2.0}, "max_sq_norm", ValueError),
        ({"max_sq_norm": math.nan}, "max_sq_norm", ValueError),
        ({"max_sq_norm": math.inf}, "max_sq_norm", ValueError),
        ({"max_sq_norm": True}, "max_sq_norm", TypeError),
        ({"max_sq_norm": "5"}, "max_sq_norm", TypeError),
        ({"lkj_concentration": 0.0}, "lkj_concentration", ValueError),
        ({"lkj_concentration": True}, "lkj_concentration", TypeError),
        ({"max_tree_depth": 0}, "max_tree_depth", ValueError),
        ({"max_tree_depth": 3.0}, "max_tree_depth", TypeError),
    ],
)
def test_logistic_regression_refuses_bad_arguments(kwargs, name, error):
    message = str(refused(error, name, bv.models.LogisticRegression, **kwargs))
    if name == "max_sq_norm":
        assert "or None" in message


def test_logistic_regression_inherits_check():
    data = _released(LogisticRegressionStatistic(2), 2)
    model = bv.models.LogisticRegression(max_sq_norm=np.float64(6.0))
    assert model.max_sq_norm == 6.0 and model.check(data) is None
    wrong_length = data._replace(perturbed=data.perturbed[:, :1])
    refused(ValueError, "not a logistic-regression PASS-GLM statistic", model.check, wrong_length)
