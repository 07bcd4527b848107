"""How much of a party's statistic survives its privacy noise, shown to the party on its own machine at release time
(docs/own_data.md, "3. What epsilon buys at a given count").

Per block of a built-in statistic (Sim et al. 2023, App. A.1; the layout of `bayesval.statistics`) the figure is
the block's signal-to-noise ratio: the root mean square of its exact entries over the noise standard deviation, so
1 means that a typical entry is as large as its noise. The block that ties the target to the features (the sums of
y x) is what tells the posterior anything about the coefficients: below `INFORMATIVE_SNR` there the release carries
almost no information, and the report names the likely cause, from what the party sees on its own machine: bounds
far above its rows (or features not scaled at all: the noise grows with X_NORM^2 while the sums of y x grow with the
rows' norms), else an epsilon too small for its count.

What is private: the figures come from the party's exact statistic and its rows' norms, which never leave it. The
report is printed on the party's screen (`bayesval release`) or warned about in its own process (`Party.release`);
it is not written to the release file, and a party should not send it to anyone.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesval.statistics import Bounds, LinearRegressionStatistic, LogisticRegressionStatistic

# Below this signal-to-noise ratio in the block of sums of y x, a typical entry is under a tenth of its noise: the
# release says almost nothing about how the target depends on the features. On Pima (docs/own_data.md) raw features
# under bounds 900 give 0.001-0.003 and 8 standardised features under bounds 4 at epsilon 0.5 give 1.0-2.6.
INFORMATIVE_SNR = 0.1
# Bounds this many times the median row norm (or the median |y|) are "far above the data".
FAR_ABOVE = 4.0
# Rows whose median norm exceeds this have not been scaled: the noise, which grows with X_NORM^2, swamps the
# first-order sums, which grow with X_NORM.
UNSCALED_NORM = 10.0
TARGET_BLOCK = "y x"
BLOCK_MEANING = {
    "y x": "sums of target x feature, what the coefficients are learnt from",
    "y": "sum of the target",
    "y y": "sum of squared targets",
    "x": "sums of each feature",
    "x x": "sums of feature x feature (second moments)",
}


class BlockSignal(NamedTuple):
    """One block of a statistic: its name (a key of `BLOCK_MEANING`), number of entries and signal-to-noise ratio."""

    block: str
    entries: int
    snr: float


class SignalReport(NamedTuple):
    """Signal-to-noise per block of one release, and a warning naming the likely cause when it carries little."""

    owner: str
    noise_std: float
    blocks: tuple[BlockSignal, ...]
    warning: str | None

    def lines(self) -> list[str]:
        """The report as the `bayesval release` command prints it."""
        lines = [
            "  signal-to-noise per block of the statistic: root mean square of its exact entries / the noise std "
            f"{self.noise_std:.4g}",
            "  (computed here from your data, for your eyes only: not written to the release file)",
        ]
        for block in self.blocks:
            entries = f"{block.entries} {'entry' if block.entries == 1 else 'entries'}"
            lines.append(f"    {block.block:<4} {block.snr:10.3g}  ({entries}: {BLOCK_MEANING[block.block]})")
        return lines


def block_names(statistic) -> np.ndarray | None:
    """The block of each entry of a built-in statistic, in its entry order; None for a user statistic."""
    if isinstance(statistic, LinearRegressionStatistic):
        d = statistic.num_features
        names = {(d + 1, d + 1): "y y", (d, d + 1): "y"}
        rows, cols = statistic.pairs
        return np.array(
            [names.get((a, b), "y x" if b == d + 1 else "x" if b == d else "x x") for a, b in zip(rows, cols)]
        )
    if isinstance(statistic, LogisticRegressionStatistic):
        d = statistic.num_features
        rows, cols = statistic.pairs
        return np.array(["y x"] * d + ["y"] + ["x" if b == d else "x x" for b in cols])
    return None


def signal_report(
    owner: str, statistic, exact: np.ndarray, noise_std: float, X: np.ndarray, y: np.ndarray, bounds: Bounds, guarantee
) -> SignalReport | None:
    """The signal-to-noise report of a release of `statistic` (None for a user statistic): `exact` the clipped
    data's statistic, X and y the party's raw rows (for the cause only), `guarantee` its `DPGuarantee`."""
    names = block_names(statistic)
    if names is None:
        return None
    exact = np.asarray(exact, dtype=np.float64)
    blocks = tuple(
        BlockSignal(block, int(np.sum(names == block)), float(np.sqrt(np.mean(exact[names == block] ** 2)) / noise_std))
        for block in dict.fromkeys(names)
    )
    target = next(b for b in blocks if b.block == TARGET_BLOCK)
    warning = None
    if target.snr < INFORMATIVE_SNR:
        warning = (
            f"{owner}: this release carries almost no information: the sums of target x feature are at "
            f"signal-to-noise {target.snr:.2g} (a typical entry is {target.snr:.2g} times its noise std "
            f"{noise_std:.4g}; informative from about {INFORMATIVE_SNR:g}). Likely cause: "
            + _likely_cause(X, y, bounds, guarantee, len(X), target.snr)
        )
    return SignalReport(owner, float(noise_std), blocks, warning)


def _likely_cause(X: np.ndarray, y: np.ndarray, bounds: Bounds, guarantee, count: int, snr: float) -> str:
    """The bounds when they lie far above the party's rows (or the features are not scaled), else epsilon for the
    count; the figures quoted are the party's own and stay on its machine."""
    norms = np.sqrt(np.sum(np.asarray(X, dtype=np.float64) ** 2, axis=1))
    median, largest = float(np.median(norms)), float(np.max(norms))
    advice = (
        "scale the features with public constants every party agrees on, so that rows have norms of a few units, "
        "and declare bounds of that size (docs/own_data.md)"
    )
    if median > UNSCALED_NORM or bounds.x_norm > FAR_ABOVE * median:
        return (
            f"the bounds: X_NORM = {bounds.x_norm:g} against rows of median norm {median:.3g} (largest {largest:.3g}); "
            "the noise grows with X_NORM^2 while the sums of target x feature grow with the rows' norms: " + advice
        )
    median_y = float(np.median(np.abs(y)))
    if bounds.y_abs is not None and bounds.y_abs > FAR_ABOVE * max(median_y, 1e-12):
        return (
            f"the bounds: Y_ABS = {bounds.y_abs:g} against a median |y| of {median_y:.3g}; the noise "
            "grows with Y_ABS^2: scale the target with a public constant and declare Y_ABS of that size"
        )
    return (
        f"epsilon = {guarantee.epsilon:g} is too small for {count} records: the noise is set by the bounds and "
        f"epsilon, the sums grow with the count, so about {count * INFORMATIVE_SNR / max(snr, 1e-300):.3g} records "
        "(or a larger epsilon) would bring them to an informative level"
    )
