"""Checking a statistic's claimed l2 sensitivity by a search over neighbouring datasets (docs/architecture.md,
"The privacy boundary"; the built-in statistics' own derivations: docs/sensitivity.md).

A party's noise scale is calibrated from the sensitivity its statistic claims for the declared bounds. A
claim that is too small gives a release that is nearly noiseless while the ledger still calls it private,
and nothing downstream would notice. So before a statistic's first release its claim is checked: a
search over replace-one neighbours D = B + {z}, D' = B + {z'} inside the bounds looks for a pair further
apart than the claim, and a claim the search beats is an error.

The search gives a lower bound on the true sensitivity: it can prove a claim wrong, never prove it right
(a proof is the statistic's own derivation from the bounds). It never touches a party's data, and its
randomness is a fixed-seed numpy Generator: it is not privacy noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesval.statistics import Bounds
from bayesval.validation import check_int, check_positive

# Class-label sets tried (a statistic may accept either or both).
_LABEL_SETS: tuple[tuple[float, float], ...] = ((0.0, 1.0), (-1.0, 1.0))
_REFINE_ROUNDS = 32
_REFINE_PROPOSALS = 8
_BLOCK = 1024


@dataclass(frozen=True)
class NeighbourPair:
    """The furthest-apart neighbours the search found: D = base + {(x, y)} and D' = base + {(x_other, y_other)}."""

    distance: float
    x: np.ndarray
    y: float
    x_other: np.ndarray
    y_other: float
    base_X: np.ndarray
    base_y: np.ndarray
    statistic: np.ndarray
    statistic_other: np.ndarray

    @property
    def rounding(self) -> float:
        """A bound on the floating-point error of `distance`: it is a difference of these two vectors."""
        return 1e-12 * max(float(np.max(np.abs(self.statistic))), float(np.max(np.abs(self.statistic_other))))


def search_sensitivity(
    statistic: Any,
    bounds: Bounds,
    num_features: int,
    *,
    seed: int = 0,
    num_candidates: int = 384,
    base_records: int = 4,
) -> float:
    """A lower bound, found by search, on the replace-one l2 sensitivity of `statistic` under `bounds`.

    That is max ||compute(D) - compute(D')||_2 over datasets of base_records + 1 records inside the bounds
    that differ in one record. See `find_furthest_neighbours` for how the search works.
    """
    return find_furthest_neighbours(
        statistic, bounds, num_features, seed=seed, num_candidates=num_candidates, base_records=base_records
    ).distance


def check_sensitivity_claim(
    statistic: Any,
    bounds: Bounds,
    num_features: int,
    claimed: float | None = None,
    *,
    owner: str = "party",
    seed: int = 0,
    base_records: int = 4,
) -> float:
    """Check `claimed` (default `statistic.sensitivity(bounds)`) against a search over neighbouring datasets.

    Sensitivities are derived from the declared bounds and a claim is checked before its first release
    (docs/architecture.md, "The privacy boundary"): a claim the search beats would under-noise the release, so it is
    a ValueError that names the owner, the statistic, both numbers and the records that beat it. Returns the claim.

    The search uses datasets of base_records + 1 records; a statistic whose sensitivity depends on the
    record count (a mean) should be checked with base_records = its count - 1.
    """
    name = type(statistic).__name__
    if claimed is None:
        try:
            claimed = statistic.sensitivity(bounds)
        except ValueError as error:
            raise ValueError(f"{owner}: {name}.sensitivity({bounds}) failed: {error}") from error
    claimed = check_positive(f"{owner}: the l2 sensitivity {name} claims", claimed)
    worst = _searched_once(statistic, bounds, num_features, seed, base_records, owner)
    # The slack is relative (to the claim, and to the rounding of a difference of large statistics) so that
    # statistics of any scale are checked alike: an absolute 1e-12 would wave through every claim below it.
    if worst.distance > claimed * (1 + 1e-9) + worst.rounding:
        raise ValueError(
            f"{owner}: {name} claims l2 sensitivity {claimed:.6g} under {bounds}, but a search over neighbouring "
            f"datasets found {worst.distance:.6g} ({worst.distance / claimed:.3g}x the claim): replacing the record "
            f"x={_fmt(worst.x)}, y={worst.y:.6g} by x={_fmt(worst.x_other)}, y={worst.y_other:.6g} in a dataset "
            f"of {len(worst.base_y) + 1} record(s){_describe_records(worst.base_X, worst.base_y)}. "
            f"Its noise would be calibrated to too small a sensitivity; fix {name}.sensitivity"
        )
    return claimed


# The searches that ran to the end, by what decides them: the parties of a valuation share their statistic and bounds,
# and each party's first release would run the same search again (docs/benchmarks.md, "Releases of many parties").
_SEARCHED: dict[tuple, NeighbourPair] = {}
_SEARCHES_KEPT = 256


def _searched_once(
    statistic: Any, bounds: Bounds, num_features: int, seed: int, base_records: int, owner: str
) -> NeighbourPair:
    """`find_furthest_neighbours` with the default candidates, remembered for a statistic and bounds that can be
    hashed (the built-in statistics and `Bounds` are frozen dataclasses, equal by value): its generator is seeded,
    so the same statistic, bounds, features, seed and base give the same pair. A search that raises is not
    remembered: its message names `owner`."""
    decided_by = (type(statistic), statistic, bounds, num_features, seed, base_records)
    try:
        return _SEARCHED[decided_by]
    except KeyError:
        pass
    except TypeError:  # a statistic that cannot be hashed (a mutable dataclass, say) is searched every time
        decided_by = None
    pair = find_furthest_neighbours(statistic, bounds, num_features, seed=seed, base_records=base_records, owner=owner)
    if decided_by is not None:
        if len(_SEARCHED) >= _SEARCHES_KEPT:
            _SEARCHED.clear()
        _SEARCHED[decided_by] = pair
    return pair


def find_furthest_neighbours(
    statistic: Any,
    bounds: Bounds,
    num_features: int,
    *,
    seed: int = 0,
    num_candidates: int = 384,
    base_records: int = 4,
    owner: str = "party",
) -> NeighbourPair:
    """Search replace-one neighbours inside `bounds` for the pair whose statistics are furthest apart.

    For each fixed base B (base_records records at x = 0, and base_records random records inside the
    bounds; non-additive statistics depend on B) and each accepted label set, the candidate records z are
    (a) extreme points: x = +-x_norm on each axis or 0, with y in {+-y_abs, 0} or each class label;
    (b) num_candidates random records: directions uniform (a third of them on two random axes only), half
    on the sphere ||x|| = x_norm and half at radius x_norm U^(1/d); y at +-y_abs half of the time and
    uniform otherwise (or a random label). The furthest pair among the vectors compute(B + {z}) is found
    with blocked Gram matrices, then (c) refined by a (1 + lambda) evolution strategy: each round perturbs
    both records of the best pair, projects them back into the bounds and keeps the furthest pair; the
    step shrinks after a round with no improvement. The best pair over all bases and label sets is kept.
    """
    name = type(statistic).__name__
    if not isinstance(bounds, Bounds):
        raise TypeError(f"{owner}: bounds must be bayesval.statistics.Bounds(x_norm, y_abs), got {bounds!r}")
    num_features = check_int(f"{owner}: num_features", num_features, minimum=1)
    num_candidates = check_int(f"{owner}: num_candidates", num_candidates, minimum=2)
    base_records = check_int(f"{owner}: base_records", base_records, minimum=0)
    size = check_int(f"{owner}: {name}.size", getattr(statistic, "size", None), minimum=1)
    search = _Search(statistic, bounds, num_features, size, np.random.default_rng(seed), owner)

    # Label domains: real y in [-y_abs, y_abs] (None) when y is bounded, and the class-label sets inside the
    # bounds; a domain the statistic rejects (e.g. a classifier's statistic and real y) is skipped.
    domains: list[tuple[float, ...] | None] = [None] if bounds.y_abs is not None else []
    domains += [labels for labels in _LABEL_SETS if bounds.y_abs is None or max(map(abs, labels)) <= bounds.y_abs]
    rejected, label_sets = [], []
    for labels in domains:
        probe_X = np.zeros((base_records + 2, num_features))
        pattern = (bounds.y_abs, -bounds.y_abs, 0.0) if labels is None else labels
        try:
            search.compute(probe_X, np.resize(np.asarray(pattern), len(probe_X)))
        except _Rejected as error:
            rejected.append(f"{'real y' if labels is None else _fmt(np.asarray(labels))}: {error}")
            continue
        label_sets.append(labels)
    if not label_sets:
        hint = "" if bounds.y_abs is not None else "; for a real-valued y declare Bounds(x_norm=..., y_abs=...)"
        raise ValueError(f"{owner}: {name} rejects every label domain tried ({'; '.join(rejected)}){hint}")

    bases = ["zeros", "random"] if base_records > 0 else ["zeros"]
    best: NeighbourPair | None = None
    for labels in label_sets:
        for base in bases:
            pair = search.run(labels, base, base_records, num_candidates)
            if best is None or pair.distance > best.distance:
                best = pair
    assert best is not None
    return best


class _Rejected(ValueError):
    """The statistic raised ValueError on a dataset inside the bounds."""


class _Search:
    """One search's statistic, bounds and generator; `run` searches one base and label set."""

    def __init__(
        self, statistic: Any, bounds: Bounds, num_features: int, size: int, rng: np.random.Generator, owner: str
    ) -> None:
        self.statistic, self.bounds, self.d, self.size, self.rng = statistic, bounds, num_features, size, rng
        self.owner, self.name = owner, type(statistic).__name__

    def compute(self, X: np.ndarray, y: np.ndarray, *, check_finite: bool = True) -> np.ndarray:
        try:
            value = self.statistic.compute(X, y)
        except ValueError as error:
            raise _Rejected(str(error)) from error
        value = np.asarray(value, dtype=np.float64)
        if value.shape != (self.size,):
            raise ValueError(
                f"{self.owner}: {self.name}.compute returned shape {value.shape} for {len(X)} records; "
                f"it must return shape ({self.size},) (its size)"
            )
        if check_finite and not np.all(np.isfinite(value)):
            raise self.non_finite(X, y)
        return value

    def non_finite(self, X: np.ndarray, y: np.ndarray) -> ValueError:
        return ValueError(
            f"{self.owner}: {self.name}.compute returned non-finite values for records inside the declared bounds "
            f"{self.bounds}: X={_fmt(X)}, y={_fmt(y)}"
        )

    def statistics(self, base_X: np.ndarray, base_y: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """compute(base + {(X[i], y[i])}) for every candidate i, stacked (n, size)."""
        k = len(base_y)
        datasets_X = np.empty((len(X), k + 1, self.d))
        datasets_X[:, :k], datasets_X[:, k] = base_X, X
        datasets_y = np.empty((len(X), k + 1))
        datasets_y[:, :k], datasets_y[:, k] = base_y, y
        out = np.empty((len(X), self.size))
        for i in range(len(X)):
            try:
                out[i] = self.compute(datasets_X[i], datasets_y[i], check_finite=False)
            except _Rejected as error:
                raise ValueError(
                    f"{self.owner}: {self.name}.compute raised on a dataset inside the declared bounds {self.bounds} "
                    f"(X={_fmt(datasets_X[i])}, y={_fmt(datasets_y[i])}): {error}"
                ) from error
        finite = np.isfinite(out).all(axis=1)
        if not finite.all():
            i = int(np.argmin(finite))
            raise self.non_finite(datasets_X[i], datasets_y[i])
        return out

    def project(self, X: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        return X * np.minimum(1.0, self.bounds.x_norm / np.maximum(norms, 1e-300))

    def random_directions(self, n: int) -> np.ndarray:
        return _normalise(self.rng.normal(size=(n, self.d)))

    def random_labels(self, n: int, labels: tuple[float, ...] | None) -> np.ndarray:
        if labels is not None:
            return self.rng.choice(np.asarray(labels), size=n)
        y_abs = self.bounds.y_abs
        extreme = self.rng.uniform(size=n) < 0.5
        return np.where(extreme, y_abs * self.rng.choice([-1.0, 1.0], size=n), self.rng.uniform(-y_abs, y_abs, n))

    def base(self, kind: str, k: int, labels: tuple[float, ...] | None) -> tuple[np.ndarray, np.ndarray]:
        if kind == "zeros":
            return np.zeros((k, self.d)), np.full(k, 0.0 if labels is None else labels[0])
        radii = self.bounds.x_norm * self.rng.uniform(size=(k, 1)) ** (1.0 / self.d)
        return self.random_directions(k) * radii, self.random_labels(k, labels)

    def candidates(self, n: int, labels: tuple[float, ...] | None) -> tuple[np.ndarray, np.ndarray]:
        """Extreme points, then n random records: a third of them supported on two random axes."""
        x_norm = self.bounds.x_norm
        axes = np.concatenate([np.eye(self.d), -np.eye(self.d), np.zeros((1, self.d))]) * x_norm
        ys = np.asarray(labels if labels is not None else (self.bounds.y_abs, -self.bounds.y_abs, 0.0))
        extreme_X, extreme_y = np.repeat(axes, len(ys), axis=0), np.tile(ys, len(axes))
        directions = self.random_directions(n)
        sparse = np.arange(n) % 3 == 2
        if self.d > 2:
            keep = _random_axes_mask(self.rng, int(sparse.sum()), self.d, 2)
            directions[sparse] = _normalise(directions[sparse] * keep)
        radii = np.ones((n, 1))
        radii[n // 2 :, 0] = self.rng.uniform(size=n - n // 2) ** (1.0 / self.d)
        random_X = directions * radii * x_norm
        return np.concatenate([extreme_X, random_X]), np.concatenate([extreme_y, self.random_labels(n, labels)])

    def perturb(self, x: np.ndarray, y: float, scale: float, labels: tuple[float, ...] | None, n: int):
        """n proposals near (x, y), projected into the bounds.

        Half move only the coordinates x uses plus one random axis (optima of quadratic statistics sit on
        few axes); a quarter are pushed out to ||x|| = x_norm.
        """
        noise = self.rng.normal(size=(n, self.d))
        sparse = np.arange(n) % 2 == 1
        noise[sparse] *= (np.abs(x) > 1e-12 * self.bounds.x_norm) | _random_axes_mask(
            self.rng, int(sparse.sum()), self.d, 1
        )
        X = self.project(x + scale * self.bounds.x_norm * noise)
        norms = np.linalg.norm(X, axis=1)
        to_sphere = (self.rng.uniform(size=n) < 0.25) & (norms > 0)
        X[to_sphere] *= (self.bounds.x_norm / norms[to_sphere])[:, None]
        if labels is not None:
            flip = self.rng.uniform(size=n) < 0.25
            Y = np.where(flip, self.rng.choice(np.asarray(labels), size=n), y)
        else:
            y_abs = self.bounds.y_abs
            Y = np.clip(y + scale * y_abs * self.rng.normal(size=n), -y_abs, y_abs)
        return X, Y

    def run(self, labels: tuple[float, ...] | None, base_kind: str, k: int, num_candidates: int) -> NeighbourPair:
        base_X, base_y = self.base(base_kind, k, labels)
        X, Y = self.candidates(num_candidates, labels)
        S = self.statistics(base_X, base_y, X, Y)
        i, j = _furthest_pair(S)
        X, Y, S = X[[i, j]], Y[[i, j]], S[[i, j]]
        scale = 0.5
        for _ in range(_REFINE_ROUNDS):
            Xa, Ya = self.perturb(X[0], Y[0], scale, labels, _REFINE_PROPOSALS)
            Xb, Yb = self.perturb(X[1], Y[1], scale, labels, _REFINE_PROPOSALS)
            new_X, new_Y = np.concatenate([Xa, Xb]), np.concatenate([Ya, Yb])
            X, Y = np.concatenate([X, new_X]), np.concatenate([Y, new_Y])
            S = np.concatenate([S, self.statistics(base_X, base_y, new_X, new_Y)])
            i, j = _furthest_pair(S)
            if {i, j} == {0, 1}:
                scale *= 0.7  # no proposal improved on the pair: look closer
            X, Y, S = X[[i, j]], Y[[i, j]], S[[i, j]]
        return NeighbourPair(
            distance=_distance(S[0], S[1]),
            x=X[0],
            y=float(Y[0]),
            x_other=X[1],
            y_other=float(Y[1]),
            base_X=base_X,
            base_y=base_y,
            statistic=S[0],
            statistic_other=S[1],
        )


def _furthest_pair(S: np.ndarray) -> tuple[int, int]:
    """Indices (i, j) maximising ||S[i] - S[j]||, via ||a - b||^2 = |a|^2 + |b|^2 - 2 a.b in row blocks.

    Rows are centred first so the expansion does not cancel away the differences of large vectors, and
    scaled so that squares of huge statistics (huge declared bounds) do not overflow.
    """
    S = S - S.mean(axis=0)
    largest = np.max(np.abs(S))
    if largest > 0:
        S = S / largest
    squared = np.einsum("ij,ij->i", S, S)
    best, best_pair = -np.inf, (0, 0)
    for start in range(0, len(S), _BLOCK):
        block = slice(start, start + _BLOCK)
        distances = squared[block, None] + squared[None, :] - 2.0 * (S[block] @ S.T)
        flat = int(np.argmax(distances))
        row, col = divmod(flat, len(S))
        if distances[row, col] > best:
            best, best_pair = distances[row, col], (start + row, col)
    return best_pair


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b||_2 without overflow in the squares."""
    difference = a - b
    largest = float(np.max(np.abs(difference)))
    return largest * float(np.linalg.norm(difference / largest)) if largest > 0 else 0.0


def _normalise(X: np.ndarray) -> np.ndarray:
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-300)


def _random_axes_mask(rng: np.random.Generator, n: int, d: int, k: int) -> np.ndarray:
    """(n, d) booleans, each row True on k distinct random axes."""
    return np.argsort(rng.uniform(size=(n, d)), axis=1) < k


def _fmt(values: np.ndarray) -> str:
    text = np.array2string(
        np.asarray(values, dtype=float), separator=", ", max_line_width=10**6, formatter={"float_kind": "{:.4g}".format}
    )
    return text.replace("\n", "")


def _describe_records(X: np.ndarray, y: np.ndarray) -> str:
    if len(y) == 0:
        return ""
    if not X.any() and np.all(y == y[0]):
        return f" whose other {len(y)} are at x=0, y={y[0]:.6g}"
    return f" whose other {len(y)} are X={_fmt(X)}, y={_fmt(y)}"
