"""The privacy of a data-point estimator's releases, for every family on `bayesval.estimators.base.PointEstimator`:
the KNN family and DP-gradient semivalues release through :class:`PrivateRelease` (a checked (epsilon, delta),
Poisson subsampling rate and noise source, each valuation one release through the Gaussian rounded to a grid,
calibrated by dp-accounting), DP Layered Shapley perturbs its values once through a Laplace mechanism (`perturb`).
Each returns the release's own ledger, which the estimator records in its `ledger_` (docs/privacy.md)."""

from __future__ import annotations

from bayesval.privacy import DPGuarantee, Mechanism, NoiseSource, PrivacyLedger
from bayesval.privacy.accounting import epsilon_at
from bayesval.validation import check_positive, check_probability, to_float

OWNERS = "each training point"  # the owner of a data-point release: every point is its own owner


def check_sampling_probability(value: float) -> float:
    number = to_float("sampling_probability", value)  # TypeError for a bool, a string, None
    if not 0 < number <= 1:
        raise ValueError(f"sampling_probability must lie in (0, 1], got {value!r}")
    return number


def check_privacy(epsilon: float | None, delta: float | None, *, required: bool) -> tuple[float, float] | None:
    """(epsilon, delta) checked: epsilon > 0 and delta in (0, 1), both or neither (unless `required`)."""
    if epsilon is None and delta is None and not required:
        return None
    if epsilon is None or delta is None:
        raise ValueError(
            f"epsilon and delta must be given together (epsilon > 0, delta in (0, 1)), got "
            f"epsilon={epsilon!r}, delta={delta!r}"
        )
    return check_positive("epsilon", epsilon), check_probability("delta", delta)


def check_noise_options(private: bool, noise_seed, allow_seed_reuse, what: str, needs: str = "epsilon and delta"):
    """Refuse a privacy-noise seed (or leave to reuse one) where nothing is private: it would do nothing."""
    if not private and (noise_seed is not None or allow_seed_reuse):
        raise ValueError(f"noise_seed / allow_seed_reuse apply to {what}: set {needs} too")


def perturb(mechanism: Mechanism, values, noise: NoiseSource, what: str):
    """Release `values` once through `mechanism` (output perturbation) with noise from `noise`: (released values,
    the release's ledger)."""
    ledger = PrivacyLedger()
    released, _ = mechanism.perturb(values, noise=noise, owner=OWNERS, what=what, ledger=ledger)
    return released, ledger


class PrivateRelease:
    """An estimator's privacy: its guarantee, Poisson subsampling rate and noise source, the mechanism
    calibrated per validation-set size, and each `.value()` call as one release through it."""

    def __init__(self, epsilon, delta, sampling_probability, noise_seed, allow_seed_reuse) -> None:
        self.guarantee = DPGuarantee(*check_privacy(epsilon, delta, required=True))
        self.sampling_probability = check_sampling_probability(sampling_probability)
        self.noise = NoiseSource(noise_seed, allow_reuse=allow_seed_reuse)
        self._mechanisms: dict[tuple, Mechanism] = {}

    def mechanism(self, sensitivity: float, compositions: int, dimension: int, **grid_settings) -> Mechanism:
        """The Gaussian rounded to a grid (`Mechanism.gaussian_on_grid`, floating-point safe; `grid_settings`: grid,
        integer_statistic) for the guarantee over `compositions` releases of `dimension` entries (one per
        validation point, or per permutation), each on a Poisson subsample: calibrated by dp-accounting's PLD
        accountant (the paper uses PRV; PLD is tighter)."""
        calibration = (sensitivity, compositions, dimension, tuple(sorted(grid_settings.items())))
        if calibration not in self._mechanisms:
            self._mechanisms[calibration] = Mechanism.gaussian_on_grid(
                self.guarantee,
                sensitivity,
                dimension,
                num_compositions=compositions,
                sampling_probability=self.sampling_probability,
                adjacency="add-or-remove-one",
                **grid_settings,
            )
        return self._mechanisms[calibration]

    def release(
        self,
        program,
        inputs,
        *,
        sensitivity: float,
        compositions: int,
        what: str,
        noise_shape,
        identity=(),
        **grid_settings,
    ):
        """Run `program(privacy_key, counts, *inputs, grid=, noise_std=)` as one floating-point-safe release:
        `counts` holds round(X) in grid steps per entry of `noise_shape` (its last axis the entries of one release),
        drawn exactly, which the program adds in integers to its statistic in grid steps (`Mechanism.run_on_grid`);
        the key is for what else the release draws in secret (Poisson subsamples). `identity`: the program's
        settings outside `inputs` (sampling key, model, release rule), part of the release's fingerprint so that a
        seeded noise source refuses to perturb a different release with the same noise. `grid_settings`: the grid,
        and integer_statistic for a statistic of whole numbers (counts), which is not rounded. Returns (output,
        ledger, diagnostics)."""
        mechanism = self.mechanism(sensitivity, compositions, noise_shape[-1], **grid_settings)
        ledger = PrivacyLedger()
        output, release = mechanism.run_on_grid(
            lambda key, counts, *args: program(key, counts, *args, grid=mechanism.grid, noise_std=mechanism.noise_std),
            inputs,
            noise_shape=noise_shape,
            noise=self.noise,
            owner=OWNERS,
            what=what,
            ledger=ledger,
            identity=identity,
        )
        diagnostics = {
            "epsilon_target": self.guarantee.epsilon,
            "epsilon_spent": epsilon_at(release.event, self.guarantee.delta)[0],
            "delta": self.guarantee.delta,
            "sampling_probability": self.sampling_probability,
            "noise_std": release.noise_std,
            "noise_multiplier": release.noise_scale / release.calibrated_sensitivity,
            "grid": release.grid,
            "privacy_noise": repr(self.noise),
        }
        return output, ledger, diagnostics
