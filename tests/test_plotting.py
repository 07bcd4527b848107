"""`result.plot()`: a PNG for a party valuation and for a data-point valuation, whose panels show the result's own
numbers (values and error bars, coalition values, privacy spent, the detection curve)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayesval as bv  # noqa: E402
from bayesval.experiments.detection import detection_auroc  # noqa: E402
from bayesval.games.shapley import coalition_masks  # noqa: E402
from bayesval.privacy.ledger import PrivacyLedger  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def party_result(rng) -> bv.ValuationResult:
    """Three released parties (real releases: their ledgers hold the calibrated events) and made-up values."""
    X, y = rng.uniform(-0.5, 0.5, size=(60, 2)), rng.uniform(-1, 1, 60)
    privacy = PrivacyLedger()
    for i, epsilon in enumerate((0.2, 0.1, 1.0)):
        party = bv.Party(X, y, epsilon=epsilon, bounds=bv.Bounds(x_norm=1.0, y_abs=1.0), name=f"p{i + 1}")
        party.release(bv.models.LinearRegression().statistic(2))
        privacy.merge(party.ledger)
    masks = coalition_masks(3)
    return bv.ValuationResult(
        method="test",
        values=np.array([0.5, 0.25, 2.0]),
        stderr=np.array([0.05, 0.1, 0.02]),
        names=["p1", "p2", "p3"],
        coalition_masks=masks,
        coalition_values=masks.sum(axis=1) * 1.5,
        coalition_stderr=np.full(len(masks), 0.1),
        privacy=privacy,
    )


def test_party_plot_writes_a_png_of_values_coalitions_and_privacy(rng, tmp_path):
    result = party_result(rng)
    path = tmp_path / "parties.png"
    figure = result.plot(path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE and path.stat().st_size > 10_000
    values, coalitions, privacy = figure.axes
    np.testing.assert_allclose([bar.get_height() for bar in values.patches], result.values)
    (error_bars,) = [c.lines[2][0].get_segments() for c in values.containers if hasattr(c, "has_yerr")]
    np.testing.assert_allclose([segment[1, 1] - segment[0, 1] for segment in error_bars], 2 * result.stderr)
    points = coalitions.lines[0].get_ydata()
    np.testing.assert_allclose(points, result.coalition_values)
    spent = result.privacy_spent()
    declared, converted = privacy.containers  # the declared guarantee first, then the conversion
    np.testing.assert_allclose([bar.get_height() for bar in declared], [0.2, 0.1, 1.0])
    np.testing.assert_allclose([bar.get_height() for bar in converted], [spent[o].epsilon for o in spent])
    assert declared.get_label() == "declared (2, epsilon)-RDP"
    assert converted.get_label() == "converted to (epsilon, delta = 1e-05)-DP"
    assert spent["p3"].epsilon > spent["p1"].epsilon > spent["p2"].epsilon
    assert privacy.get_subplotspec().colspan == range(0, 2)  # the third panel spans the last row: no empty cell
    plt.close(figure)


def test_coalition_labels_are_set_apart_and_inside_the_axes(rng, tmp_path):
    """Each coalition's label, "{1}", "{1,2}", ..., is centred above its own error bar; the coalitions of one size are
    spread 0.6 apart at most, so no two labels of one size share a position, and every label lies inside the axes."""
    result = party_result(rng)
    figure = result.plot(tmp_path / "parties.png")
    coalitions = figure.axes[1]
    texts = coalitions.texts
    assert [t.get_text() for t in texts] == ["{1}", "{2}", "{1,2}", "{3}", "{1,3}", "{2,3}", "{1,2,3}"]
    renderer = figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    inside = coalitions.get_window_extent(renderer)
    assert all(inside.x0 <= box.x0 and box.x1 <= inside.x1 and box.y1 <= inside.y1 for box in boxes)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(figure)


def test_point_plot_shows_the_distribution_ranks_and_detection_curve(rng, tmp_path):
    values = rng.normal(size=200)
    corrupted = np.zeros(200, bool)
    corrupted[np.argsort(values)[:15]] = True  # the 15 lowest values ...
    corrupted[np.argsort(values)[-5:]] = True  # ... and 5 of the highest are corrupted
    result = bv.ValuationResult(method="points", values=values, stderr=np.full(200, 0.1), names=list(range(200)))
    path = tmp_path / "points.png"
    figure = result.plot(path, corrupted=corrupted)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    histogram, ranked, detection = figure.axes
    assert sum(bar.get_height() for bar in histogram.patches) == 200
    np.testing.assert_allclose(ranked.lines[0].get_ydata(), np.sort(values))
    curve = detection.lines[0]
    inspected, found = curve.get_xdata(), curve.get_ydata()
    assert found[14] == pytest.approx(15 / 20) and found[-1] == 1.0 and inspected[-1] == 1.0
    assert f"{detection_auroc(values, corrupted):.2f}" in curve.get_label()
    plt.close(figure)
    two_panels = result.plot()
    assert len(two_panels.axes) == 2
    plt.close(two_panels)


def test_bad_corruption_labels_are_refused(rng):
    result = bv.ValuationResult(method="points", values=np.zeros(5), stderr=np.zeros(5), names=list(range(5)))
    with pytest.raises(ValueError, match=r"one boolean per value \(5\)"):
        result.plot(corrupted=np.zeros(4, bool))
    with pytest.raises(ValueError, match="one boolean per value"):
        result.plot(corrupted=np.zeros(5))
    with pytest.raises(ValueError, match="values parties"):
        party_result(rng).plot(corrupted=np.zeros(3, bool))
