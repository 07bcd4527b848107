"""ValuationResult: values with standard errors and counts, coalition values, diagnostics, the privacy ledger, and
for sampled semivalues the running sums that let a run resume or merge with another.

A result is immutable once built: a frozen dataclass whose arrays are read-only copies (the posterior draws, which
can be large, are kept as given), so what a valuation returned is what a report, a reward or a resumed run reads; a
changed result is a new one (`dataclasses.replace`, which checks it again). It is the leaf every wing returns, so it
imports nothing above `bayesval.validation` (docs/architecture.md): the privacy ledger and the rewards it holds are
used by duck typing and written through the record registry of `bayesval.results.serialisation`, whose archive is
the one file format of `save` and `load`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bayesval.outputs import check_output_path
from bayesval.results.serialisation import (
    Record,
    decode,
    encode,
    jsonable,
    read_archive,
    register,
    registered,
    write_archive,
)
from bayesval.results.state import CoalitionEstimates, SemivalueState, describe_error
from bayesval.results.variance import judged
from bayesval.validation import check_bool, check_count_array, check_finite_array, check_real_array

LEDGER_KIND = "bayesval.privacy_ledger"  # the record kind `bayesval.privacy.PrivacyLedger` registers


class ValueItem(NamedTuple):
    """One index of a result: `result["party 1"]`."""

    name: str
    value: float
    stderr: float
    count: int | None
    converged: bool | None


@register("bayesval.valuation_result")
@dataclass(frozen=True)
class ValuationResult:
    """What a valuation produced, carried forward to rewards, reports and resumed runs instead of recomputed.

    values, stderr       one value per party (Shapley) or per data point, with its standard error
    names                party names / point indices, aligned with values
    coalition_masks      (num_coalitions, n) boolean masks, when coalitions were valued
    coalition_values     (num_coalitions,) mean value of each coalition, with coalition_stderr
    privacy              every DP release behind the values (a `bayesval.PrivacyLedger`: `privacy_spent()` composes it)
    diagnostics          sampler convergence (R-hat, ESS per coalition), counts, settings
    counts               draws behind each value (sampled semivalues), with `converged`, the stopping rule's verdict
                         per index
    state                a sampled semivalue's running sums (`bayesval.results.state`): `resume_from=result`
                         continues the run (on a copy), `a + b` merges two runs of the same game
    coalition_estimates  a party valuation's coalition estimates and its game (`bayesval.results.state`):
                         `valuate(..., resume_from=result)` takes them over instead of sampling them again
    draws                with `valuate(..., keep_draws=True)`: each valued coalition's posterior draws
                         (num_coalitions, repeats, chains, draws, d), aligned with coalition_masks, for
                         `to_inference_data()`; parameter_names names theta's d coordinates
    rewards              the model rewards (a `bayesval.rewards.Rewards`), when a valuation allocated them

    `result["name"]` is one index's `ValueItem`, `result.sorted()` orders by value, `variances` are stderr^2.

    A result is valid once built, or refused with an error naming the field: finite values, one distinct name and
    one standard error per value, each error >= 0 or inf (inf: the Monte Carlo error is unknown, as from a single
    permutation; NaN is refused), counts that are whole numbers >= 0, and coalition arrays that fit each other.
    It is frozen: its fields cannot be reassigned and its arrays (but `draws`) are read-only copies; a result with
    other fields is `dataclasses.replace(result, ...)`, checked again. `save` writes it as a record (`to_record`,
    kind "bayesval.valuation_result", version 2) in the archive of `bayesval.results.serialisation`; `load` reads
    that and the files written before it (version 1), and refuses a file that is not a saved result with an error
    naming the path.
    """

    method: str
    values: np.ndarray
    stderr: np.ndarray
    names: list[str]
    coalition_masks: np.ndarray | None = None
    coalition_values: np.ndarray | None = None
    coalition_stderr: np.ndarray | None = None
    privacy: Record = field(default_factory=lambda: registered(LEDGER_KIND)())
    diagnostics: dict[str, Any] = field(default_factory=dict)
    counts: np.ndarray | None = None
    converged: np.ndarray | None = None
    state: SemivalueState | None = None
    draws: np.ndarray | None = None
    parameter_names: list[str] | None = None
    rewards: Record | None = None
    coalition_estimates: CoalitionEstimates | None = None

    version = 2  # of its record (see `to_record`); the kind is set by `register`

    def __post_init__(self) -> None:
        """Check every field (see the class docstring): a result is valid once built, or refused."""
        if not isinstance(self.method, str):
            raise TypeError(f"{_WHERE} method must be a string, got {type(self.method).__name__}")
        values = check_finite_array(f"{_WHERE} values", self.values, ndim=1, remedy="a result holds finite values only")
        stderr = check_real_array(f"{_WHERE} stderr", self.stderr, ndim=1)
        if isinstance(self.names, (str, bytes)) or not isinstance(self.names, (list, tuple, np.ndarray)):
            raise TypeError(f"{_WHERE} names must be a list of names, one per value, got {type(self.names).__name__}")
        if not len(values) == len(stderr) == len(self.names):
            raise ValueError(
                f"{_WHERE} values, stderr and names must have the same length (values {len(values)}, stderr "
                f"{len(stderr)}, names {len(self.names)})"
            )
        _check_errors(f"{_WHERE} stderr", stderr)
        names = [str(name) for name in self.names]
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        if repeated:
            raise ValueError(f"{_WHERE} names must be distinct (as strings); {repeated[:5]} appear more than once")
        counts = None if self.counts is None else check_count_array(f"{_WHERE} counts", self.counts)
        converged = None if self.converged is None else _flags(f"{_WHERE} converged", self.converged)
        for name, array in (("counts", counts), ("converged", converged)):
            if array is not None and array.shape != values.shape:
                raise ValueError(f"{_WHERE} {name} must have one entry per value ({len(values)})")
        checked = {"values": values, "stderr": stderr, "counts": counts, "converged": converged}
        checked |= self._checked_coalitions(len(values))
        if not isinstance(self.privacy, registered(LEDGER_KIND)):
            raise TypeError(f"{_WHERE} privacy must be a bayesval.PrivacyLedger, got {type(self.privacy).__name__}")
        if not isinstance(self.diagnostics, dict):
            raise TypeError(f"{_WHERE} diagnostics must be a dict, got {type(self.diagnostics).__name__}")
        object.__setattr__(self, "names", names)
        for name, array in checked.items():
            object.__setattr__(self, name, _read_only(array))

    def _checked_coalitions(self, num_values: int) -> dict[str, np.ndarray | None]:
        """coalition_masks (C, n) booleans; coalition_values (C,) finite and coalition_stderr (C,) errors, with them."""
        if self.coalition_masks is None:
            if self.coalition_values is not None or self.coalition_stderr is not None:
                raise ValueError(f"{_WHERE} coalition_values and coalition_stderr need coalition_masks")
            return {}
        masks = _flags(f"{_WHERE} coalition_masks", self.coalition_masks)
        if masks.ndim != 2 or masks.shape[1] != num_values:
            raise ValueError(
                f"{_WHERE} coalition_masks must be (coalitions, {num_values}): one column per value, got shape "
                f"{masks.shape}"
            )
        values, stderr = self.coalition_values, self.coalition_stderr
        if values is not None:
            values = check_finite_array(
                f"{_WHERE} coalition_values", values, ndim=1, remedy="a result holds finite values only"
            )
        if stderr is not None:
            stderr = _check_errors(
                f"{_WHERE} coalition_stderr", check_real_array(f"{_WHERE} coalition_stderr", stderr, 1)
            )
        checked = {"coalition_masks": masks, "coalition_values": values, "coalition_stderr": stderr}
        for name in ("coalition_values", "coalition_stderr"):
            if checked[name] is not None and len(checked[name]) != len(masks):
                raise ValueError(
                    f"{_WHERE} {name} must have one entry per coalition mask ({len(masks)}), got {len(checked[name])}"
                )
        return checked

    @property
    def variances(self) -> np.ndarray:
        """The variance of each value's estimate, stderr^2."""
        return self.stderr**2

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, name: str | int) -> ValueItem:
        """One index by name (or position)."""
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            if not -len(self) <= name < len(self):
                raise IndexError(f"index {name} out of range for a result of {len(self)} values")
            position = int(name) % len(self)
        elif isinstance(name, str) and name in self.names:
            position = self.names.index(name)
        else:
            shown = self.names[:5] + (["..."] if len(self) > 5 else [])
            raise KeyError(f"no value named {name!r} in this result; names: {shown}")
        count = None if self.counts is None else int(self.counts[position])
        converged = None if self.converged is None else bool(self.converged[position])
        return ValueItem(
            self.names[position], float(self.values[position]), float(self.stderr[position]), count, converged
        )

    def sorted(self, descending: bool = True) -> ValuationResult:
        """The result ordered by value (highest first unless descending=False), for display. The sorted copy has
        no resume state: resume or merge the unsorted result."""
        descending = check_bool("descending", descending)
        order = np.argsort(-self.values if descending else self.values, kind="stable")
        return replace(
            self,
            values=self.values[order],
            stderr=self.stderr[order],
            names=[self.names[i] for i in order],
            coalition_masks=None if self.coalition_masks is None else self.coalition_masks[:, order],
            counts=None if self.counts is None else self.counts[order],
            converged=None if self.converged is None else self.converged[order],
            state=None,
        )

    def __add__(self, other: ValuationResult) -> ValuationResult:
        """Both runs' draws of the same game together: sums and counts add, values and errors follow."""
        if not isinstance(other, ValuationResult):
            return NotImplemented
        if self.state is None or other.state is None:
            raise ValueError(
                "only sampled semivalues merge (results with a `state`: from bayesval.games.semivalue, unsorted)"
            )
        if self.names != other.names:
            raise ValueError(f"cannot merge the results of different games: names {self.names} != {other.names}")
        for label in ("semivalue", "sampler"):
            mine, theirs = getattr(self.state, label), getattr(other.state, label)
            if mine != theirs:
                raise ValueError(f"cannot merge the results of different games: {label} {mine!r} != {theirs!r}")
        state = self.state.merged(other.state, self.names)
        values, variances, dof = state.estimate()
        privacy = type(self.privacy)().merge(self.privacy).merge(other.privacy)
        stderr = np.sqrt(variances)
        converged, diagnostics = None, self.diagnostics | {"evaluations": state.evaluations, "merged": True}
        if self.converged is not None and other.converged is not None:  # more draws than a run that converged,
            held = self.converged | other.converged  # where a variance to trust says so (`judged`)
            converged, verdicts = judged(state.exact_indices, state.ranges, dof, stderr, held)
            diagnostics["indices"] = state.index_diagnostics(dof, verdicts)
        if "utility_error" in diagnostics:
            diagnostics["utility_error"] = describe_error(state)
        return ValuationResult(
            self.method,
            values,
            stderr,
            self.names,
            privacy=privacy,
            diagnostics=diagnostics,
            counts=state.index_counts,
            converged=converged,
            state=state,
            coalition_estimates=self.coalition_estimates,  # what resuming it may reuse, as before the merge
        )

    def coalition_value(self, members: list[str]) -> float:
        """Value of the coalition made of the named parties."""
        if self.coalition_masks is None:
            raise ValueError(f"the {self.method} valuation did not value coalitions")
        names = isinstance(members, (list, tuple, set, frozenset)) and all(isinstance(m, str) for m in members)
        if not names:
            raise TypeError(f"members must be a list of party names (e.g. {self.names[:2]}), got {members!r}")
        unknown = set(members) - set(self.names)
        if unknown:
            raise ValueError(f"members has unknown parties {sorted(unknown)}; known: {self.names}")
        mask = np.isin(self.names, list(members))
        if not mask.any():
            return 0.0  # the empty coalition
        row = np.flatnonzero((self.coalition_masks == mask).all(axis=1))
        if not row.size:
            raise ValueError(f"the coalition {sorted(members)} was not valued by {self.method}")
        return float(self.coalition_values[row[0]])

    def privacy_spent(self, *, delta: float | None = None) -> dict[str, Any]:
        """Each owner's spend: dp-accounting's composition of its releases in `privacy`, as epsilon at `delta`
        (default: the owner's calibration delta, else 1e-5) and as RDP (`bayesval.privacy.PrivacySpent` per owner)."""
        return self.privacy.spent_by_owner(delta=delta)

    def to_inference_data(self):
        """The coalition posteriors as ArviZ data (`InferenceData` on ArviZ 0.x, the `xarray.DataTree` that
        replaced it on ArviZ 1.x; `.posterior["theta"]` reads the same on both): one variable `theta` with
        dimensions (chain, draw, coalition, repeat, parameter). Each repeat's chains are a separate run of the
        coalition's posterior, so `arviz.summary` gives R-hat and ESS per (coalition, repeat, parameter).
        `valuate` reports, per coalition, the max over parameters of the R-hat of the chains of every repeat
        together and the min of the ESS per repeat (leaving out chains NUTS dropped for low BFMI; Gibbs drops
        none). Needs the draws: `valuate(..., keep_draws=True)`."""
        if self.draws is None:
            raise ValueError(
                "this result kept no posterior draws: value with bayesval.valuate(..., keep_draws=True) to use "
                "to_inference_data()"
            )
        try:
            import arviz as az
        except ImportError:
            raise ImportError("to_inference_data() needs ArviZ: pip install 'bayesval[arviz]'") from None
        dimension = self.draws.shape[-1]
        names = self.parameter_names if self.parameter_names is not None else [f"theta[{i}]" for i in range(dimension)]
        groups = {"posterior": {"theta": np.transpose(self.draws, (2, 3, 0, 1, 4))}}
        labels = {
            "coords": {
                "coalition": self.coalition_labels(),
                "repeat": np.arange(self.draws.shape[1]),
                "parameter": list(names),
            },
            "dims": {"theta": ["coalition", "repeat", "parameter"]},
        }
        if int(az.__version__.split(".")[0]) >= 1:  # ArviZ 1.x: one dict of groups in, an xarray DataTree out
            return az.from_dict(groups, **labels)
        return az.from_dict(**groups, **labels)

    def plot(self, path: str | Path | None = None, *, corrupted=None):
        """A figure of the result (`bayesval.results.plotting.plot_result`): values with error bars, and for parties the
        coalition values and the privacy spent, for data points the value distribution and, given `corrupted`
        (one boolean per point), the detection curve. Written to `path` if given; returns the Figure."""
        from bayesval.results.plotting import plot_result

        return plot_result(self, path, corrupted=corrupted)

    def to_dataframe(self):
        """One row per party / point: value and standard error (pandas)."""
        import pandas as pd

        columns = {"value": self.values, "stderr": self.stderr}
        columns |= {name: getattr(self, name) for name in ("counts", "converged") if getattr(self, name) is not None}
        return pd.DataFrame(columns, index=self.names)

    def coalitions_dataframe(self):
        """One row per valued coalition: members, value and standard error (pandas)."""
        import pandas as pd

        return pd.DataFrame(
            {"value": self.coalition_values, "stderr": self.coalition_stderr}, index=self.coalition_labels()
        )

    def coalition_labels(self) -> list[str]:
        """Each valued coalition as "{member, member}", aligned with coalition_masks."""
        if self.coalition_masks is None:
            raise ValueError(f"the {self.method} valuation did not value coalitions")
        return ["{" + ", ".join(n for n, m in zip(self.names, row) if m) + "}" for row in self.coalition_masks]

    def to_record(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The result as a record of `bayesval.results.serialisation` (version 2): meta {method, names, diagnostics,
        parameter_names, and the envelopes of privacy, state and rewards}, arrays `RESULT_ARRAYS` and the nested
        records' arrays prefixed "privacy_", "state_", "rewards_"."""
        arrays = {name: getattr(self, name) for name in RESULT_ARRAYS if getattr(self, name) is not None}
        meta = {
            "method": self.method,
            "names": list(self.names),
            "diagnostics": jsonable(self.diagnostics),
            "parameter_names": self.parameter_names,
        }
        for slot in NESTED:
            if getattr(self, slot) is not None:
                meta[slot], nested = encode(getattr(self, slot), f"{slot}_")
                arrays |= nested
        return meta, arrays

    @classmethod
    def from_record(cls, meta: dict, arrays: dict[str, np.ndarray], *, version: int = 2) -> ValuationResult:
        """The result `to_record` wrote, or a version 1 result (the layout `save` wrote before records: privacy as
        a list of release records, state and rewards as their bare meta, arrays prefixed as now)."""
        arrays = dict(arrays)
        if version == 1:
            meta = _upgraded_from_version_1(meta)
        nested = {slot: decode(meta[slot], arrays, f"{slot}_") for slot in NESTED if meta.get(slot) is not None}
        diagnostics = meta["diagnostics"]
        if "coalition_estimates" not in nested and isinstance(diagnostics, dict):  # saved before the typed state
            estimates, diagnostics = CoalitionEstimates.from_diagnostics(diagnostics)
            nested |= {} if estimates is None else {"coalition_estimates": estimates}
        elif "coalition_estimates" in nested and isinstance(diagnostics, dict):  # a version 1 state: no diagnostics
            nested["coalition_estimates"] = nested["coalition_estimates"].with_diagnostics_of(diagnostics)
        unknown = sorted(set(arrays) - set(RESULT_ARRAYS))
        if unknown:
            raise ValueError(f"it holds arrays no result has: {unknown[:5]}")
        return cls(
            method=meta["method"],
            names=meta["names"],
            diagnostics=diagnostics,
            parameter_names=meta.get("parameter_names"),
            **nested,
            **arrays,
        )

    def save(self, path: str | Path) -> Path:
        """Write the result to an .npz archive (`bayesval.results.serialisation`: its arrays, and its metadata as
        JSON inside)."""
        return write_archive(check_output_path("path", path), self)

    @classmethod
    def load(cls, path: str | Path) -> ValuationResult:
        """Read a result written by `save` (now or by an earlier bayesval). A missing file is a FileNotFoundError;
        anything else that is not such a result (a directory, a file of another kind, one cut short, an .npz without
        a result's metadata, or a result whose contents `ValuationResult` refuses) a ValueError naming the path."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"ValuationResult.load: path must be a file path (a str or a Path), got {type(path).__name__}"
            )
        path = Path(path)
        version, meta, arrays = read_archive(path, cls.kind, noun="result", writer="ValuationResult.save")
        not_a_result = f"{path} is not a bayesval result (an .npz file written by ValuationResult.save)"
        missing = [key for key in META_KEYS if not isinstance(meta, dict) or key not in meta]
        if missing:
            raise ValueError(f"{not_a_result}: its metadata lacks {missing}")
        missing = [name for name in ("values", "stderr") if name not in arrays]
        if missing:
            raise ValueError(f"{not_a_result}: it lacks the arrays {missing}")
        try:
            return cls.from_record(meta, arrays, version=version)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            detail = f"no {error}" if isinstance(error, KeyError) else str(error)
            raise ValueError(f"{path} is not a valid bayesval result: {detail}") from None

    SHOWN = 10  # rows a repr shows; the rest are summarised

    def __repr__(self) -> str:
        def row(i: int) -> str:
            extra = "" if self.counts is None else f"  n={self.counts[i]}"
            extra += "" if self.converged is None else ("" if self.converged[i] else "  (not converged)")
            return f"  {self.names[i]:>12}: {self.values[i]: .4f} ± {self.stderr[i]:.4f}{extra}"

        shown = range(len(self)) if len(self) <= self.SHOWN else [*range(self.SHOWN // 2), *range(-self.SHOWN // 2, 0)]
        rows = [row(i) for i in shown]
        if len(self) > self.SHOWN:
            rows.insert(self.SHOWN // 2, f"  ... {len(self) - self.SHOWN} more (to_dataframe() has them all)")
        header = f"ValuationResult({self.method}; {len(self)} values"
        if self.converged is not None:
            header += f", {int(self.converged.sum())} converged"
        if self.state is not None:
            header += f", {self.state.evaluations} utility evaluations"
        shown_rewards = "" if self.rewards is None else "\n" + repr(self.rewards)
        return header + ")\n" + "\n".join(rows) + shown_rewards


_WHERE = "ValuationResult:"  # what the construction checks' errors begin with
# the arrays of a result file, besides its JSON metadata `_meta` and the state_* / rewards_* arrays
RESULT_ARRAYS = ("values", "stderr", "coalition_masks", "coalition_values", "coalition_stderr", "counts", "converged")
RESULT_ARRAYS += ("draws",)
META_KEYS = ("method", "names", "privacy", "diagnostics")
# fields that are records of their own; their arrays are prefixed with the field name
NESTED = ("privacy", "state", "rewards", "coalition_estimates")


def _upgraded_from_version_1(meta: dict) -> dict:
    """A version 1 result's meta in version 2's layout: its privacy (a list of release records), state and rewards
    (their bare meta) wrapped as the version 1 envelopes of their kinds."""
    kinds = {"privacy": LEDGER_KIND, "state": SemivalueState.kind, "rewards": "bayesval.rewards"}
    upgraded = dict(meta)
    for slot, kind in kinds.items():
        if meta.get(slot) is not None:
            inner = {"releases": meta[slot]} if slot == "privacy" else meta[slot]
            upgraded[slot] = {"kind": kind, "version": 1, "meta": inner}
    return upgraded


def _check_errors(name: str, errors: np.ndarray) -> np.ndarray:
    """Standard errors: each >= 0, or inf where the Monte Carlo error is unknown; NaN and negatives are refused."""
    bad = np.isnan(errors) | (errors < 0)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must hold standard errors >= 0 (inf where unknown), got {float(errors[index])} at index {index}"
        )
    return errors


def _flags(name: str, flags) -> np.ndarray:
    """Booleans (or 0 / 1) as a bool array."""
    array = np.asarray(flags)
    if array.dtype.kind != "b" and not (array.dtype.kind in "iuf" and np.isin(array, (0, 1)).all()):
        raise TypeError(f"{name} must hold booleans (True / False), got an array of dtype {array.dtype}")
    return array.astype(bool)


def _read_only(array: np.ndarray | None) -> np.ndarray | None:
    """A read-only copy of a result's array (None stays None)."""
    if array is None:
        return None
    array = np.array(array)
    array.flags.writeable = False
    return array
