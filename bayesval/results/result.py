"""ValuationResult: values with standard errors and counts, coalition values, diagnostics, the privacy ledger, and
for sampled semivalues the running sums that let a run resume or merge with another."""

from __future__ import annotations

import json
import os
import zipfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from bayesval.privacy.accounting import PrivacySpent
from bayesval.privacy.ledger import PrivacyLedger
from bayesval.validation import check_bool, check_count_array, check_finite_array, check_real_array

if TYPE_CHECKING:  # games imports results: the state class is imported where it is used
    from bayesval.parties.rewards.allocation import Rewards
    from bayesval.results.state import CoalitionEstimates, SemivalueState


class ValueItem(NamedTuple):
    """One index of a result: `result["party 1"]`."""

    name: str
    value: float
    stderr: float
    count: int | None
    converged: bool | None


@dataclass
class ValuationResult:
    """What a valuation produced, carried forward to rewards, reports and resumed runs instead of recomputed.

    values, stderr       one value per party (Shapley) or per data point, with its standard error
    names                party names / point indices, aligned with values
    coalition_masks      (num_coalitions, n) boolean masks, when coalitions were valued
    coalition_values     (num_coalitions,) mean value of each coalition, with coalition_stderr
    privacy              every DP release behind the values (a ledger: `privacy_spent()` composes it)
    diagnostics          sampler convergence (R-hat, ESS per coalition), counts, settings
    counts               draws behind each value (sampled semivalues), with `converged`, the stopping rule's verdict
                         per index
    state                a sampled semivalue's running sums (`bayesval.results.state`): `resume_from=result`
                         continues the run, `a + b` merges two runs of the same game
    coalition_estimates  a party valuation's coalition estimates and its game (`bayesval.results.state`):
                         `valuate(..., resume_from=result)` takes them over instead of sampling them again
    draws                with `valuate(..., keep_draws=True)`: each valued coalition's posterior draws
                         (num_coalitions, repeats, chains, draws, d), aligned with coalition_masks, for
                         `to_inference_data()`; parameter_names names theta's d coordinates

    `result["name"]` is one index's `ValueItem`, `result.sorted()` orders by value, `variances` are stderr^2.

    A result is valid once built, or refused with an error naming the field: finite values, one distinct name and
    one standard error per value, each error >= 0 or inf (inf: the Monte Carlo error is unknown, as from a single
    permutation; NaN is refused), counts that are whole numbers >= 0, and coalition arrays that fit each other.
    `load` refuses a file that is not a saved result with an error naming the path.
    """

    method: str
    values: np.ndarray
    stderr: np.ndarray
    names: list[str]
    coalition_masks: np.ndarray | None = None
    coalition_values: np.ndarray | None = None
    coalition_stderr: np.ndarray | None = None
    privacy: PrivacyLedger = field(default_factory=PrivacyLedger)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    counts: np.ndarray | None = None
    converged: np.ndarray | None = None
    state: SemivalueState | None = None
    draws: np.ndarray | None = None
    parameter_names: list[str] | None = None
    rewards: Rewards | None = None
    coalition_estimates: CoalitionEstimates | None = None

    def __post_init__(self) -> None:
        """Check every field (see the class docstring): a result is valid once built, or refused."""
        if not isinstance(self.method, str):
            raise TypeError(f"{_WHERE} method must be a string, got {type(self.method).__name__}")
        self.values = check_finite_array(
            f"{_WHERE} values", self.values, ndim=1, remedy="a result holds finite values only"
        )
        self.stderr = check_real_array(f"{_WHERE} stderr", self.stderr, ndim=1)
        if isinstance(self.names, (str, bytes)) or not isinstance(self.names, (list, tuple, np.ndarray)):
            raise TypeError(f"{_WHERE} names must be a list of names, one per value, got {type(self.names).__name__}")
        if not len(self.values) == len(self.stderr) == len(self.names):
            raise ValueError(
                f"{_WHERE} values, stderr and names must have the same length (values {len(self.values)}, stderr "
                f"{len(self.stderr)}, names {len(self.names)})"
            )
        _check_errors(f"{_WHERE} stderr", self.stderr)
        self.names = [str(name) for name in self.names]
        repeated = sorted(name for name, count in Counter(self.names).items() if count > 1)
        if repeated:
            raise ValueError(f"{_WHERE} names must be distinct (as strings); {repeated[:5]} appear more than once")
        if self.counts is not None:
            self.counts = check_count_array(f"{_WHERE} counts", self.counts)
        if self.converged is not None:
            self.converged = _flags(f"{_WHERE} converged", self.converged)
        for name in ("counts", "converged"):
            if getattr(self, name) is not None and getattr(self, name).shape != self.values.shape:
                raise ValueError(f"{_WHERE} {name} must have one entry per value ({len(self.values)})")
        self._check_coalitions()
        if not isinstance(self.privacy, PrivacyLedger):
            raise TypeError(f"{_WHERE} privacy must be a bayesval.PrivacyLedger, got {type(self.privacy).__name__}")
        if not isinstance(self.diagnostics, dict):
            raise TypeError(f"{_WHERE} diagnostics must be a dict, got {type(self.diagnostics).__name__}")

    def _check_coalitions(self) -> None:
        """coalition_masks (C, n) booleans; coalition_values (C,) finite and coalition_stderr (C,) errors, with them."""
        if self.coalition_masks is None:
            if self.coalition_values is not None or self.coalition_stderr is not None:
                raise ValueError(f"{_WHERE} coalition_values and coalition_stderr need coalition_masks")
            return
        masks = _flags(f"{_WHERE} coalition_masks", self.coalition_masks)
        if masks.ndim != 2 or masks.shape[1] != len(self.values):
            raise ValueError(
                f"{_WHERE} coalition_masks must be (coalitions, {len(self.values)}): one column per value, got shape "
                f"{masks.shape}"
            )
        self.coalition_masks = masks
        if self.coalition_values is not None:
            self.coalition_values = check_finite_array(
                f"{_WHERE} coalition_values", self.coalition_values, ndim=1, remedy="a result holds finite values only"
            )
        if self.coalition_stderr is not None:
            self.coalition_stderr = _check_errors(
                f"{_WHERE} coalition_stderr", check_real_array(f"{_WHERE} coalition_stderr", self.coalition_stderr, 1)
            )
        for name in ("coalition_values", "coalition_stderr"):
            array = getattr(self, name)
            if array is not None and len(array) != len(masks):
                raise ValueError(
                    f"{_WHERE} {name} must have one entry per coalition mask ({len(masks)}), got {len(array)}"
                )

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
        from bayesval.results.variance import trusted  # games imports results: imported here, as the state is

        state = self.state.merged(other.state)
        values, variances, dof = state.estimate()
        privacy = PrivacyLedger().merge(self.privacy).merge(other.privacy)
        converged = None
        if self.converged is not None and other.converged is not None:  # more draws than a run that converged,
            converged = (self.converged | other.converged) & trusted(state.exact_indices, dof)  # a variance to trust
        diagnostics = self.diagnostics | {"evaluations": state.evaluations, "merged": True}
        return ValuationResult(
            self.method,
            values,
            np.sqrt(variances),
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

    def privacy_spent(self, *, delta: float | None = None) -> dict[str, PrivacySpent]:
        """Each owner's spend: dp-accounting's composition of its releases in `privacy`, as epsilon at `delta`
        (default: the owner's calibration delta, else 1e-5) and as RDP."""
        return self.privacy.spent_by_owner(delta=delta)

    def to_inference_data(self):
        """The coalition posteriors as ArviZ `InferenceData`: one variable `theta` with dimensions (chain, draw,
        coalition, repeat, parameter); each repeat's chains are a separate posterior, so `arviz.summary` gives
        R-hat and ESS per (coalition, repeat, parameter), whose max / min per coalition are the diagnostics
        `valuate` reports (which leave out chains NUTS dropped for low BFMI; Gibbs drops none). Needs the draws:
        `valuate(..., keep_draws=True)`."""
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
        return az.from_dict(
            posterior={"theta": np.transpose(self.draws, (2, 3, 0, 1, 4))},
            coords={
                "coalition": self.coalition_labels(),
                "repeat": np.arange(self.draws.shape[1]),
                "parameter": list(names),
            },
            dims={"theta": ["coalition", "repeat", "parameter"]},
        )

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

    def save(self, path: str | Path) -> Path:
        """Write the result to an .npz file (arrays) with its metadata as JSON inside."""
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a file path (str or pathlib.Path), got {type(path).__name__}")
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"path {str(path)!r} is a directory; give the result file's name, e.g. result.npz")
        arrays = {name: getattr(self, name) for name in RESULT_ARRAYS if getattr(self, name) is not None}
        meta = {
            "method": self.method,
            "names": list(self.names),
            "privacy": self.privacy.to_records(),
            "diagnostics": _jsonable(self.diagnostics),
            "parameter_names": self.parameter_names,
        }
        if self.state is not None:
            from bayesval.results.state import SemivalueState

            meta["state"] = self.state.to_json()
            arrays |= {f"state_{name}": getattr(self.state, name) for name in SemivalueState.ARRAYS}
        if self.coalition_estimates is not None:
            meta["coalition_estimates"] = self.coalition_estimates.to_json()
            arrays |= {f"coalition_estimates_{k}": v for k, v in self.coalition_estimates.to_arrays().items()}
        if self.rewards is not None:
            meta["rewards"] = self.rewards.to_json()
            stored = {name: getattr(self.rewards, name) for name in self.rewards.ARRAYS}
            arrays |= {f"rewards_{name}": value for name, value in stored.items() if value is not None}
        with path.open("wb") as handle:
            np.savez(handle, _meta=np.array(json.dumps(meta)), **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> ValuationResult:
        """Read a result written by `save`. A missing file is a FileNotFoundError; anything else that is not such a
        result (a directory, a file of another kind, one cut short, an .npz without a result's metadata, or a
        result whose contents `ValuationResult` refuses) a ValueError naming the path."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"ValuationResult.load: path must be a file path (a str or a Path), got {type(path).__name__}"
            )
        path = Path(path)
        meta, arrays = _read_result_file(path)
        try:
            state = None
            if "state" in meta:
                from bayesval.results.state import SemivalueState

                saved = [name for name in SemivalueState.ARRAYS if f"state_{name}" in arrays]  # older: no m3, m4
                state_arrays = {name: arrays.pop(f"state_{name}") for name in saved}
                state = SemivalueState.from_json(meta["state"], state_arrays)
            coalition_estimates, diagnostics = _coalition_estimates(meta, arrays)
            rewards = None
            if "rewards" in meta:
                from bayesval.parties.rewards.allocation import Rewards

                reward_arrays = {
                    name[len("rewards_") :]: arrays.pop(name) for name in list(arrays) if name[:8] == "rewards_"
                }
                rewards = Rewards.from_json(meta["rewards"], reward_arrays)
            unknown = sorted(set(arrays) - set(RESULT_ARRAYS))
            if unknown:
                raise ValueError(f"it holds arrays no result has: {unknown[:5]}")
            return cls(
                method=meta["method"],
                names=meta["names"],
                privacy=PrivacyLedger.from_records(meta["privacy"]),
                diagnostics=diagnostics,
                parameter_names=meta.get("parameter_names"),
                state=state,
                rewards=rewards,
                coalition_estimates=coalition_estimates,
                **arrays,
            )
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


def _read_result_file(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of a file `ValuationResult.save` wrote, or an error of our own naming `path`."""
    if not path.exists():
        raise FileNotFoundError(f"result file {path} does not exist")
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a bayesval result file (an .npz written by ValuationResult.save)")
    not_a_result = f"{path} is not a bayesval result (an .npz file written by ValuationResult.save)"
    names: list[str] = []
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{not_a_result}: it is not an .npz archive (another kind of file, or one cut short)")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if "_meta" not in names:
                raise KeyError("_meta")
            text = str(data["_meta"])
            arrays = {name: data[name] for name in names if name != "_meta"}
        meta = json.loads(text)
    except KeyError:
        raise ValueError(f"{not_a_result}: it has no result metadata (_meta); its arrays are {names[:5]}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{not_a_result}: its metadata is not valid JSON ({error})") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):  # corrupted members, pickled objects
        raise ValueError(
            f"{not_a_result}: its arrays cannot be read (corrupted, or pickled Python objects, which no result holds)"
        ) from None
    missing = [key for key in META_KEYS if not isinstance(meta, dict) or key not in meta]
    if missing:
        raise ValueError(f"{not_a_result}: its metadata lacks {missing}")
    missing = [name for name in ("values", "stderr") if name not in arrays]
    if missing:
        raise ValueError(f"{not_a_result}: it lacks the arrays {missing}")
    return meta, arrays


def _coalition_estimates(meta: dict, arrays: dict[str, np.ndarray]) -> tuple[CoalitionEstimates | None, dict]:
    """A saved party valuation's coalition estimates (their arrays popped from `arrays`) and its diagnostics. A result
    saved before the typed state kept them in its diagnostics ("game", "coalition_estimates"): converted, and those
    keys left out of the diagnostics."""
    from bayesval.results.state import CoalitionEstimates

    diagnostics = meta["diagnostics"]
    if "coalition_estimates" in meta:
        saved = {name: arrays.pop(f"coalition_estimates_{name}") for name in CoalitionEstimates.ARRAYS}
        return CoalitionEstimates.from_json(meta["coalition_estimates"], saved), diagnostics
    if isinstance(diagnostics, dict):  # saved before the typed state, or no party valuation
        return CoalitionEstimates.from_diagnostics(diagnostics)
    return None, diagnostics  # refused by the result's own checks


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


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
