"""Figures of a `ValuationResult` (matplotlib): what a person looks at before reading the table.

A party valuation shows the values with error bars, every valued coalition's value against its size, each
owner's privacy spend and, with rewards, each party's own value, target and reward (Sim et al. 2023, Sec. 5);
`plot_privacy_tradeoff` follows one party through valuations at several of its epsilons (Fig. 2a-c). A data-point
valuation shows the values' distribution, the values in rank order with
their error band, and, given which points are corrupted, the detection curve (Wang et al. 2023, Sec. 6: the
fraction of corrupted points found among the lowest-valued) against inspecting at random.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bayesval.outputs import IMAGE_SUFFIXES, check_output_path, write_whole
from bayesval.results.ranking import detection_auroc


def plot_result(result, path: str | Path | None = None, *, corrupted=None):
    """The figure of `result` (see the module docstring), written to `path` (PNG, PDF, SVG by suffix) if given.

    corrupted: for a data-point valuation, one boolean per point (True = corrupted), adding the detection curve.
    Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt  # with no display, matplotlib picks a file backend itself

    if path is not None:
        path = check_output_path("path", path, suffixes=IMAGE_SUFFIXES)
    parties = result.coalition_masks is not None
    if corrupted is not None:
        if parties:
            raise ValueError("corrupted= marks data points; this result values parties (coalitions)")
        corrupted = np.asarray(corrupted)
        if corrupted.dtype != bool or corrupted.shape != result.values.shape:
            raise ValueError(
                f"corrupted must be one boolean per value ({len(result.values)}), got dtype {corrupted.dtype} and "
                f"shape {corrupted.shape}"
            )
    rewarded = getattr(result, "rewards", None) is not None
    panels = 3 + rewarded if parties or corrupted is not None else 2
    figure, axes = _panel_grid(plt, panels)
    if parties:
        _party_values(axes[0], result)
        _coalition_values(axes[1], result)
        _privacy_spent(axes[2], result)
        if rewarded:
            _rewards(axes[3], result.rewards)
    else:
        _value_distribution(axes[0], result)
        _ranked_values(axes[1], result)
        if corrupted is not None:
            _detection_curve(axes[2], result.values, corrupted)
    note = "error bars: ± Monte Carlo standard error given these releases (a fresh release varies more)"
    figure.suptitle(f"{result.method}\n{note}" if parties else result.method, fontsize="medium")
    if path is not None:
        write_whole(path, lambda partial: figure.savefig(partial, dpi=120))
    return figure


# Figures fit a documentation column (~690 px on the docs site, docs/stylesheets/tutorials.css) near their natural
# size (7 in at matplotlib's 100 dpi): panels two abreast, as many rows as needed, so that 10 pt text stays legible
# where a notebook or a docs page shows the figure.
FIGURE_WIDTH_IN = 7.0
PANEL_HEIGHT_IN = 3.2


def _panel_grid(plt, panels: int):
    """A figure of `panels` axes, two per row, FIGURE_WIDTH_IN wide; an odd last panel spans the whole last row, so
    that no cell is left empty. Returns the figure and the flat list of the axes."""
    rows = -(-panels // 2)
    figure = plt.figure(figsize=(FIGURE_WIDTH_IN, PANEL_HEIGHT_IN * rows + 0.5), constrained_layout=True)
    grid = figure.add_gridspec(rows, 2)
    axes = [figure.add_subplot(grid[i // 2, i % 2]) for i in range(panels - panels % 2)]
    if panels % 2:
        axes.append(figure.add_subplot(grid[rows - 1, :]))
    return figure, axes


def _party_values(ax, result) -> None:
    positions = np.arange(len(result.values))
    ax.bar(positions, result.values, yerr=result.stderr, capsize=4, color="tab:blue", alpha=0.8)
    ax.set_xticks(positions, result.names, rotation=30 if len(result.values) > 4 else 0, ha="right")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("Shapley value (nats, ± MC s.e.)")
    ax.set_title("values of the parties")


def _coalition_values(ax, result) -> None:
    sizes = result.coalition_masks.sum(axis=1)
    positions = sizes + _spread_within_size(sizes)
    values, errors = result.coalition_values, result.coalition_stderr
    ax.errorbar(positions, values, yerr=errors, fmt="o", capsize=3, ms=4)
    if len(sizes) <= 16:  # each label centred above its own error bar: {1} and {2} stay apart, none leaves the axes
        for position, top, members in zip(positions, values + errors, result.coalition_masks):
            label = "{" + ",".join(str(i + 1) for i in np.flatnonzero(members)) + "}"
            ax.annotate(label, (position, top), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        ax.margins(y=0.15)
    ax.set_xticks(np.unique(sizes))
    ax.set_xlim(sizes.min() - 0.5, sizes.max() + 0.5)
    ax.set_xlabel("coalition size (labels: member numbers)")
    ax.set_ylabel("coalition value v_C (nats, ± MC s.e.)")
    ax.set_title(f"{len(sizes)} valued coalitions")


def _spread_within_size(sizes: np.ndarray) -> np.ndarray:
    """Offsets that spread the coalitions of each size evenly over [-0.3, 0.3] around it (0 for a size's only one)."""
    offsets = np.zeros(len(sizes))
    for size in np.unique(sizes):
        members = np.flatnonzero(sizes == size)
        if len(members) > 1:
            offsets[members] = np.linspace(-0.3, 0.3, len(members))
    return offsets


def _privacy_spent(ax, result) -> None:
    """Each owner's declared guarantee first (its epsilon, composed over its releases in the declared notion), then
    dp-accounting's conversion to the other notion, lighter and labelled as one."""
    spent = result.privacy_spent()
    if not spent:
        ax.text(0.5, 0.5, "no releases recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    owners = list(spent)
    rdp = [all(r.guarantee.is_rdp for r in result.privacy.releases if r.owner == owner) for owner in owners]
    declared = [spent[o].rdp_epsilon if is_rdp else spent[o].epsilon for o, is_rdp in zip(owners, rdp)]
    converted = [spent[o].epsilon if is_rdp else spent[o].rdp_epsilon for o, is_rdp in zip(owners, rdp)]
    positions = np.arange(len(owners))
    orders = {spent[o].rdp_order for o, is_rdp in zip(owners, rdp) if is_rdp}
    notion = {
        (True,): f"({orders.pop():g}, epsilon)-RDP" if len(orders) == 1 else "RDP",
        (False,): "(epsilon, delta)-DP",
    }
    declared_label = f"declared {notion.get(tuple(set(rdp)), 'guarantee')}"
    converted_label = {(True,): f"converted to (epsilon, delta = {spent[owners[0]].delta:g})-DP", (False,): "as RDP"}
    converted_label = converted_label.get(tuple(set(rdp)), "converted to the other notion")
    shown = ((-0.2, declared, declared_label, {}), (0.2, converted, converted_label, CONVERTED_STYLE))
    for offset, heights, label, style in shown:
        bars = ax.bar(positions + offset, heights, width=0.4, color="tab:red", label=label, **style)
        ax.bar_label(bars, [f"{e:.3g}" for e in heights], fontsize=7, padding=2)
    ax.set_xticks(positions, owners, rotation=30 if len(owners) > 4 else 0, ha="right")
    ax.set_yscale("log")
    ax.set_ylim(min(declared + converted) / 2, max(declared + converted) * 30)  # room for the legend
    ax.set_ylabel("epsilon (log scale)")
    ax.set_title("privacy: declared, then converted")
    ax.legend(loc="upper left", fontsize=7)


CONVERTED_STYLE = {"alpha": 0.3, "hatch": "//"}


def _rewards(ax, rewards) -> None:
    positions = np.arange(len(rewards.names))
    bars = (("own value v_i", rewards.singleton_values, None), ("target r*_i", rewards.targets, None))
    bars += (("reward r_i", rewards.values, rewards.stderr),)
    for offset, (label, heights, errors) in zip((-0.27, 0, 0.27), bars):
        ax.bar(positions + offset, heights, width=0.27, yerr=errors, capsize=3, label=label, alpha=0.85)
    ax.axhline(rewards.grand_value, color="black", linestyle="--", linewidth=1, label="v_N")
    ax.set_xticks(positions, rewards.names, rotation=30 if len(positions) > 4 else 0, ha="right")
    ax.set_ylabel("Bayesian surprise (nats)")
    ax.set_title(f"rewards by {rewards.mechanism} (rho = {rewards.rho:g})")
    ax.legend(loc="lower right", fontsize=8)


def plot_privacy_tradeoff(results, party: str, path: str | Path | None = None):
    """One party's own value v_i, Shapley value phi_i and reward r_i, and v_N, against that party's epsilon, over
    valuations of the same parties at several of its privacy levels (Sim et al. 2023, Fig. 2a-c): stronger privacy
    should cost value and reward. The rewards panel needs `valuate(..., rewards=...)`. Returns the Figure."""
    import matplotlib.pyplot as plt

    if path is not None:
        path = check_output_path("path", path, suffixes=IMAGE_SUFFIXES)
    results = list(results)
    if len(results) < 2:
        raise ValueError(f"a trade-off needs valuations at 2 or more privacy levels, got {len(results)}")
    if any(party not in r.names for r in results):
        raise ValueError(f"{party!r} is not a party of every result; the parties are {results[0].names}")
    index = results[0].names.index(party)
    epsilons = np.array([_own_epsilon(r, party) for r in results])
    order = np.argsort(epsilons)
    rows = {"Shapley value phi": [(r.values[index], r.stderr[index]) for r in results]}
    for label, code in (("own value v_i", 1 << index), ("grand value v_N", None)):
        rows[label] = [_coalition_value(r, code) for r in results]
    if all(r.rewards is not None for r in results):
        rows["reward r_i"] = [(r.rewards.values[index], r.rewards.stderr[index]) for r in results]
    figure, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 4), constrained_layout=True)
    for label, points in rows.items():
        mean, stderr = np.array(points).T
        ax.errorbar(epsilons[order], mean[order], yerr=stderr[order], marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xlabel(f"epsilon of {party}")
    ax.set_ylabel("nats")
    ax.set_title(f"privacy trade-off of {party}")
    ax.legend(fontsize=8)
    if path is not None:
        write_whole(path, lambda partial: figure.savefig(partial, dpi=120))
    return figure


def _own_epsilon(result, party: str) -> float:
    releases = [r for r in result.privacy.releases if r.owner == party]
    if not releases:
        raise ValueError(f"{party!r} has no release in the result's privacy ledger")
    return releases[-1].guarantee.epsilon


def _coalition_value(result, code: int | None) -> tuple[float, float]:
    masks = np.asarray(result.coalition_masks, bool)
    row = masks.all(axis=1) if code is None else (masks * (1 << np.arange(masks.shape[1]))).sum(axis=1) == code
    if not row.any():
        raise ValueError("the result did not value that coalition")
    return float(result.coalition_values[row][0]), float(result.coalition_stderr[row][0])


def _value_distribution(ax, result) -> None:
    ax.hist(result.values, bins=min(50, max(10, len(result.values) // 20)), color="tab:blue", alpha=0.8)
    ax.set_xlabel("value")
    ax.set_ylabel("points")
    ax.set_title(f"distribution of {len(result.values)} values")


def _ranked_values(ax, result) -> None:
    order = np.argsort(result.values)
    ranks = np.arange(len(order))
    ax.plot(ranks, result.values[order], color="tab:blue")
    ax.fill_between(
        ranks,
        result.values[order] - result.stderr[order],
        result.values[order] + result.stderr[order],
        color="tab:blue",
        alpha=0.25,
        linewidth=0,
    )
    ax.set_xlabel("rank (lowest value first)")
    ax.set_ylabel("value (band: ± Monte Carlo s.e.)")
    ax.set_title("values in rank order")


def _detection_curve(ax, values: np.ndarray, corrupted: np.ndarray) -> None:
    order = np.argsort(values, kind="stable")
    inspected = np.arange(1, len(values) + 1) / len(values)
    found = np.cumsum(corrupted[order]) / max(int(corrupted.sum()), 1)
    ax.plot(inspected, found, label=f"lowest value first (AUROC {detection_auroc(values, corrupted):.2f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="at random")
    ax.set_xlabel("fraction of points inspected")
    ax.set_ylabel("fraction of corrupted points found")
    ax.set_title("detecting corrupted points")
    ax.legend(loc="lower right")
