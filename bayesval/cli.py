"""The `bayesval` command: `demo` (a real private valuation on Sim et al.'s Syn setting), `release` (a party
releases its statistic from a CSV or Parquet file on its own machine), `valuate` (the mediator values release
files, or, on one trusted machine, the parties' tables released in-process) and `knn` (data-point values).

    bayesval release party_a.csv --model linear --target y --epsilon 0.5 --bounds 1,2 -o party_a.release.json
    bayesval valuate party_a.release.json party_b.release.json party_c.release.json --plot parties.png
    bayesval keygen party_a        # party_a.key (private, mode 0600) and party_a.pub (for the mediator's keyring)
    bayesval release party_a.csv ... --sign party_a.key
    bayesval valuate *.release.json --verify keys/   # a folder of the parties' .pub files, or the .pub files
    bayesval valuate a.csv b.csv c.csv --model linear --target y --epsilon 0.5 --bounds 1,2
    bayesval knn train.csv --validation val.csv --target label --method tknn --epsilon 1 --delta 1e-5 --classes 0,1
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np

import bayesval as bv
from bayesval.compilation import use_persistent_cache
from bayesval.datasets.tables import TABLE_SUFFIXES, check_class_labels, is_table, read_table, read_tables
from bayesval.inference.batching import use_cpu_cores
from bayesval.inference.diagnostics import ESS_THRESHOLD, R_HAT_THRESHOLD
from bayesval.outputs import IMAGE_SUFFIXES, check_output_path
from bayesval.validation import check_seed

# The samplers, the parties and the Syn data are imported inside the commands that use them, after the arguments and
# the output paths are checked: a command that fails on them fails before NumPyro, the party path and the signing
# library load (docs/architecture.md, "Importing on first use").

# measured by benchmarks/bench_release_spread.py (docs/benchmarks.md): the spread of the demo's phi over fresh releases
SPREAD_RELEASES = 6
SPREAD_PHI = "0.10 to 0.19 nats, against ± of about 0.01"
MODELS = {"linear": "linear_regression", "logistic": "logistic_regression"}
DEFAULT_NEIGHBOURS = 5  # knn --k
DEFAULT_TAU = -0.5  # knn --method tknn --tau
FEATURES_HELP = "comma-separated feature columns (default: all others)"
EPSILON_HELP = (
    "privacy budget of the release: epsilon of (RDP_ORDER, epsilon)-Renyi DP (with --delta: of (epsilon, delta)-DP); "
    "smaller is more private and noisier (docs/own_data.md, section 3)"
)
FORCE_HELP = "overwrite the --save / --plot files if they exist"
TOLERANCE_HELP = (
    "the standard error, in nats, every Shapley value must meet: where the coalitions are sampled (more than 10 "
    "parties) the stopping rule's (default 0.05); where every coalition is valued, repeats are added until it holds "
    "from at least 11 repeats (default: the preset's repeats alone; 0.005 is Sim et al.'s precision)"
)
DELTA_HELP = "declare (epsilon, delta)-DP with this delta instead of Renyi DP (default: Renyi DP, no delta)"
RDP_ORDER_HELP = "the order lambda of the (lambda, epsilon)-Renyi DP guarantee (default 2, as in Sim et al. 2023)"
BOUNDS_HELP = (
    "declared bounds X_NORM or X_NORM,Y_ABS: every row's features are scaled onto ||x||_2 <= X_NORM and the target "
    "clipped to |y| <= Y_ABS before the statistic is computed; the noise grows with X_NORM^2, so scale the features "
    "(with public constants) to norms of a few units. Y_ABS is needed for linear and ignored for logistic (labels "
    "are +-1). All parties declare the same bounds (docs/own_data.md, section 2)"
)


def demo(seed: int, progress_bar: bool, save: str | None, budget=None, force: bool = False) -> bv.ValuationResult:
    """Syn: parties of 100 / 200 / 400 points at epsilon = (0.2, 0.1, 0.2), lambda = 2 (Sim et al. 2023, Sec. 6, the
    Syn setting), valued and rewarded by tempering; `budget` is the parsed flags of `SamplerConfig.add_arguments`
    (default: the fast preset).

    The parties' privacy noise comes from OS entropy, so each run is a new private release; `seed`
    fixes the data and the sampler only.
    """
    _check_outputs(force=force, save=save)
    check_seed("--seed", seed)
    from bayesval.datasets.synthetic import make_syn

    model = bv.models.LinearRegression()
    _cores_for(model)  # before make_syn starts JAX
    syn = make_syn(seed=seed)
    epsilons = (0.2, 0.1, 0.2)
    parties = [
        bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}")
        for i, ((X, y), eps) in enumerate(zip(syn.parties, epsilons))
    ]
    print(f"Syn setting: {[len(p.X) for p in parties]} points, epsilon = {epsilons}, bounds {syn.bounds}")
    config = _config(budget, model)
    tolerance = getattr(budget, "tolerance", None)
    return _valuate_and_report(model, parties, seed, config, progress_bar, save, "tempering", tolerance=tolerance)


def release(
    data: str,
    *,
    model: str,
    target: str,
    epsilon: float,
    bounds: bv.Bounds,
    output: str | None,
    name: str | None,
    features: list[str] | None,
    delta: float | None,
    rdp_order: float | None,
    noise_seed: int | None,
    experiment: bool = False,
    grid: float | None = None,
    sign: str | None = None,
    force: bool = False,
) -> Path:
    """Party side: read the party's CSV, clip, compute and perturb its statistic (discrete Gaussian noise on a grid,
    floating-point safe), write the release file. A seeded release needs `experiment`, which the file records;
    `sign`, the party's private key file (`keygen`), signs it (read before anything is released); an existing
    release file is overwritten only with `force`, and the output path is checked before the release."""
    path = Path(data)
    name = path.name.split(".")[0] if name is None else _file_name("--name", name)
    if not name:
        raise ValueError(f"{path}: its file name gives no party name (it starts with a dot); name the party: --name")
    output_path = _release_output(output or f"{name}.release.json", force)
    _check_guarantee_options(delta, rdp_order)
    from bayesval.parties.boundary import Columns, PerturbedStatistic
    from bayesval.parties.signing import load_signing_key

    signing_key = None if sign is None else load_signing_key(sign)
    _check_bounds(model, bounds)
    X, y, columns = read_table(path, target, features)
    _check_target(model, [(path, y)], target)
    party = bv.Party(
        X,
        y,
        epsilon=epsilon,
        bounds=bounds,
        name=name,
        delta=delta,
        rdp_order=2.0 if rdp_order is None else rdp_order,
        noise_seed=noise_seed,
        grid=grid,
    )
    if noise_seed is not None and not experiment:
        raise ValueError(
            "--noise-seed makes noise anyone with the seed can remove: a seeded release leaves the machine only as an "
            "experiment; add --experiment (the release file records it) or drop --noise-seed"
        )
    statistic = _model(model).statistic(party.num_features)
    with warnings.catch_warnings(record=True) as caught:  # shown after the release line, in the party's words
        warnings.simplefilter("always")
        released = party.release(statistic)
    released = dataclasses.replace(released, columns=Columns(target, tuple(columns)))  # the file names them
    try:
        output_path = released.save(output_path, experiment=experiment, signing_key=signing_key)
    except OSError as error:  # the path was checked before the release: the disk is full, or gone
        raise OSError(
            f"-o {str(output_path)!r} could not be written ({error.strerror or error}); nothing was written, and the "
            "release never left this process, so releasing again spends no more privacy"
        ) from None
    print(
        f"{name}: released a {MODELS[model]} statistic of {released.count} records under "
        f"{party.guarantee.describe()} (noise std {released.noise_std:.4g}, {released.release.mechanism_label}"
        f"{', an experiment' if experiment else ''}) to {output_path}"
    )
    print(f"{name}: {PerturbedStatistic.load(output_path).integrity}")
    if released.release.floating_point_safe:
        print("\n".join(_grid_meaning([released.release.grid])))
    report = party.signal_report(statistic)
    if report is not None:
        print("\n".join(report.lines()))
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return output_path


def _grid_meaning(grids: list[float]) -> list[str]:
    """What 'discrete Gaussian on grid G (floating-point safe)' means (docs/privacy.md)."""
    grid = " / ".join(f"{g:g}" for g in grids)
    text = (
        f"  grid {grid}: the statistic is rounded to multiples of the grid and integer multiples of it are added as "
        "noise (a discrete Gaussian), so no floating-point rounding of the noise can leak the data "
        "(floating-point safe; Canonne, Kamath & Steinke 2020); the grid is chosen from the sensitivity, --grid sets it"
    )
    return textwrap.wrap(text, width=116, subsequent_indent="  ")


def keygen(path: str, owner: str | None = None) -> Path:
    """Party side: a new Ed25519 key pair, PATH.key (private, mode 0600, stays with the party) and PATH.pub (the
    public key line for the mediator's keyring, naming the party `owner`, default the file name)."""
    from bayesval.parties.signing import generate_keys

    keys = generate_keys(path, owner)
    print(f"{keys.owner}: private key {keys.private} (mode 0600: keep it on this machine, sign with --sign)")
    print(f"{keys.owner}: public key {keys.public}, fingerprint {keys.fingerprint}")
    print(
        "Send the .pub file to the mediator, and confirm its fingerprint with them over another channel (a call, a "
        "signed letter): the mediator's keyring is what `bayesval valuate --verify` checks every release file against."
    )
    return keys.public


def valuate_files(
    files: list[str],
    *,
    model: str | None,
    seed: int,
    progress_bar: bool,
    save: str | None,
    budget=None,
    plot: str | None = None,
    table_options: dict | None = None,
    verify: list[str] | None = None,
    rewards: str | None = None,
    rho: float | None = None,
    force: bool = False,
) -> bv.ValuationResult:
    """Mediator side: value the parties of release files, or of CSV / Parquet tables released here in-process (a
    trusted single machine: `table_options` gives target, epsilon, bounds and the rest); `budget` is the parsed
    flags of `SamplerConfig.add_arguments` (default: the fast preset). `verify`: the parties' public key files,
    keyring files or folders; every release file must then be signed by the key of the party it names. `rewards`
    ('tempering' or 'noise', with the targets' `rho`) also rewards each party (Sim et al. 2023, Sec. 5), printed and
    saved with the result. An existing `save` or `plot` file is overwritten only with `force`."""
    if rho is not None and rewards is None:
        raise ValueError(f"--rho {rho:g} sets the reward targets: pass --rewards tempering or --rewards noise with it")
    _check_outputs(tuple(files), force, save=save, plot=plot)
    check_seed("--seed", seed)
    tables = [f for f in files if is_table(f)]
    if tables and len(tables) != len(files):
        raise ValueError("pass either release files (.release.json) or data tables (.csv / .parquet), not both")
    if tables and verify:
        raise ValueError("--verify checks signed release files; data tables are released here, in-process")
    if tables:
        options = {option: value for option, value in (table_options or {}).items() if value is not None}
        _check_guarantee_options(options.get("delta"), options.get("rdp_order"))
        missing = [f"--{name}" for name in ("target", "epsilon", "bounds") if options.get(name) is None]
        if missing or model is None:
            raise ValueError(f"valuing data tables needs {', '.join(missing + (['--model'] if model is None else []))}")
        _check_bounds(model, options["bounds"])
        target = options.pop("target")
        data, _ = read_tables(tables, target, options.pop("features", None))
        _check_target(model, [(path, y) for path, (_, y) in zip(tables, data)], target)
        names = [Path(f).name.split(".")[0] for f in tables]
        if len(set(names)) != len(names):
            names = [str(Path(f)) for f in tables]
        parties = [bv.Party(X, y, name=name, **options) for (X, y), name in zip(data, names)]
    else:
        from bayesval.parties.boundary import PerturbedStatistic
        from bayesval.parties.signing import Keyring

        _no_table_options(table_options or {})
        keyring = None if not verify else Keyring.load(verify)
        parties = [PerturbedStatistic.load(f, verify_with=keyring) for f in files]
        model = _releases_model(files, parties, model)
    print(f"{len(parties)} parties: {', '.join(p.name if tables else p.owner for p in parties)}")
    for released in [] if tables else parties:
        print(f"  {released.owner} ({released.source_file.path}): {released.integrity}")
    model = _model(model)
    _cores_for(model)  # reading the files and the tables starts no JAX backend
    config = _config(budget, model)
    tolerance = getattr(budget, "tolerance", None)
    result = _valuate_and_report(model, parties, seed, config, progress_bar, save, rewards, rho, tolerance)
    _plot(result, plot)
    return result


def knn(
    train: str,
    *,
    validation: str,
    target: str,
    features: list[str] | None,
    method: str,
    neighbours: int | None,
    tau: float | None,
    epsilon: float | None,
    delta: float | None,
    save: str | None,
    plot: str | None,
    force: bool = False,
    classes: list[float] | None = None,
) -> bv.ValuationResult:
    """Data points: KNN-Shapley or (DP-)TKNN-Shapley (Wang et al. 2023) of each training row against the
    validation rows (an existing `save` or `plot` file overwritten only with `force`). `classes`, the public class
    labels, sets C; DP-TKNN-Shapley (`epsilon`) requires it, since C counted from the private training labels would
    reach every value un-noised (docs/knn.md, "Public classes")."""
    _check_outputs((train, validation), force, save=save, plot=plot)
    if method == "knn":
        if epsilon is not None or delta is not None or tau is not None:
            raise ValueError("--tau, --epsilon and --delta apply to --method tknn ((DP-)TKNN-Shapley)")
        estimator = bv.estimators.KNNShapley(DEFAULT_NEIGHBOURS if neighbours is None else neighbours, classes=classes)
    else:
        if neighbours is not None:
            raise ValueError("--k applies to --method knn: TKNN-Shapley counts every neighbour within --tau")
        if epsilon is not None and classes is None:
            raise ValueError(
                "--epsilon (DP-TKNN-Shapley) needs --classes, the public class labels (e.g. --classes 0,1): the "
                "number of classes enters every value, and counted from the private training labels it would be "
                "released un-noised"
            )
        estimator = bv.estimators.TKNNShapley(
            DEFAULT_TAU if tau is None else tau, epsilon=epsilon, delta=delta, classes=classes
        )
    (train_data, val_data), _ = read_tables([train, validation], target, features)
    _check_target("knn", [(train, train_data[1]), (validation, val_data[1])], target)
    if classes is None:
        _check_knn_classes(train, validation, target, train_data[1], val_data[1])
    else:
        for path, labels in ((train, train_data[1]), (validation, val_data[1])):
            check_class_labels(path, target, labels, tuple(classes), "labels among --classes " + _listed(classes))
    result = bv.valuate(estimator, train_data, validation=val_data)
    frame = result.to_dataframe()
    frame.index = range(1, len(frame) + 1)  # a RangeIndex
    frame.index.name = "row"
    print(f"{result.method}: {len(frame)} training rows of {train} against {len(val_data[1])} validation rows")
    print(
        f"lowest values (first candidates to inspect); row = the row's number in {train}, 1 = the first below the "
        "header:"
    )
    exact = bool(np.all(frame["stderr"] == 0))
    shown = frame.drop(columns="stderr") if exact else frame.rename(columns={"stderr": PLUS_MINUS})
    print(shown.sort_values("value").head(10).to_string(float_format=lambda v: f"{v:.4g}"))
    if exact:
        if result.privacy.releases:
            print(
                "The values are a closed form of the released noisy counts, counted on a random subsample of the "
                "training rows: no Monte Carlo error given this release, so no ± column; another release (new noise, "
                "a new subsample) gives other values."
            )
        else:
            print("The values are computed exactly (a closed form, no sampling), so they carry no ± column.")
    if result.privacy.releases:
        print("\nPrivacy:")
        print("\n".join(_privacy_lines(result)))
    if save:
        _save(result, save)
    _plot(result, plot)
    return result


def _save(result: bv.ValuationResult, path: str) -> None:
    """Write the result to --save `path` (checked before the work, so what fails here is the disk: full, or gone).
    Where that fails, the finished result, which may hold the only record of the releases a valuation of tables
    made, goes to a file of its own in the system's temporary folder instead, and the command fails naming both."""
    try:
        print(f"saved to {result.save(path)}")
    except OSError as error:
        rescue = Path(tempfile.gettempdir()) / f"bayesval-result-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.npz"
        why = f"--save {path!r} could not be written ({error.strerror or error})"
        try:
            result.save(rescue)
        except OSError as second:
            raise OSError(f"{why}, nor {str(rescue)!r} ({second.strerror or second}): the result is lost") from None
        raise OSError(
            f"{why}; the result was saved to {str(rescue)!r} instead (bayesval.ValuationResult.load reads it)"
        ) from None


def _plot(result: bv.ValuationResult, path: str | None) -> None:
    if path:
        result.plot(path)
        print(f"plot written to {path}")


def _model(name: str):
    return bv.models.LinearRegression() if name == "linear" else bv.models.LogisticRegression()


def _cores_for(model) -> None:
    """One CPU device per core for a model sampled by Gibbs (`use_cpu_cores`; a Gibbs call 1.5 times faster on 2
    cores, docs/benchmarks.md, "Two CPU devices, one sweep program"), called before the command starts JAX. A NUTS
    model keeps one device: its LAPACK kernels hung a process with two (docs/architecture.md)."""
    if model.sampler == "gibbs":
        use_cpu_cores()


def _config(budget, model) -> bv.SamplerConfig:
    """The sampler config the budget flags ask for (the fast preset where there are none)."""
    if budget is None:
        return bv.SamplerConfig.preset("fast", model.sampler)
    warm = [f"--{name.replace('_', '-')}" for name in ("warm_warmup", "warm_samples") if getattr(budget, name, None)]
    if warm and model.sampler != "nuts":
        raise ValueError(f"{' / '.join(warm)}: the budget of NUTS chains started warm, which {model.name} does not run")
    return bv.SamplerConfig.from_arguments(budget, model.sampler)


PLUS_MINUS = "± MC s.e."


def _valuate_and_report(
    model,
    parties,
    seed: int,
    config,
    progress_bar: bool,
    save: str | None,
    rewards=None,
    rho: float | None = None,
    tolerance: float | None = None,
):
    start = time.perf_counter()
    options = {"rewards": rewards, "rho": rho, "tolerance": tolerance}
    result = bv.valuate(model, parties, key=seed, config=config, progress_bar=progress_bar, **options)
    elapsed = time.perf_counter() - start
    diagnostics = result.diagnostics  # a result saved before 2026-12-01 records no "repeats": its config's ran
    repeats = diagnostics.get("repeats", diagnostics["sampler"]["num_repeats"])
    sources = f"the sampler's {repeats} repeats"
    if result.counts is not None:  # permutation sampling: the permutations' own error is in the ± too
        sources += " and the sampled permutations"
    table = {"float_format": lambda v: f"{v:.3f}"}
    print("\nBayesian surprise v_C = KL(p(theta | o_C) || p(theta)) of every coalition C, in nats:")
    print(result.coalitions_dataframe().rename(columns={"stderr": PLUS_MINUS}).to_string(**table))
    print("\nShapley values phi_i of the parties, in nats:")
    print(result.to_dataframe().rename(columns={"stderr": PLUS_MINUS}).to_string(**table))
    print("\n".join(_plus_minus_meaning(sources)))
    print("\nPrivacy: each party's declared guarantee, then its conversion to the other notion (dp-accounting):")
    print("\n".join(_privacy_lines(result) + _delta_meaning(result)))
    print("\nNoise of each release:")
    for released in result.privacy.releases:
        print(f"  {released.owner}: {released.mechanism_label}")
    grids = sorted({r.grid for r in result.privacy.releases if r.floating_point_safe})
    if grids:
        print("\n".join(_grid_meaning(grids)))
    for party in parties:
        for note in getattr(party, "caveats", []):
            print(f"  note: {party.owner}'s release file: {note}")
    if result.rewards is not None:
        symbol = "kappa" if result.rewards.mechanism == "tempering" else "tau"
        print(
            f"\nModel rewards by {result.rewards.mechanism} (rho = {result.rewards.rho:g}; Sim et al. 2023, Sec. 5): "
            "each party receives posterior samples whose surprise r meets its rho-Shapley target r*, without further "
            "privacy cost:"
        )
        frame = result.rewards.to_dataframe().rename(columns={"stderr": PLUS_MINUS})
        print(frame.to_string(**table))
        print("\n".join(_reward_legend(symbol, repaired=result.rewards.repair_weight > 0)))
    r_hat, ess = max(result.diagnostics["r_hat"]), min(result.diagnostics["ess"])
    from bayesval.parties.valuation import coalitions_rerun

    rerun = coalitions_rerun(result.diagnostics)
    print(
        f"\nConvergence: max split R-hat {r_hat:.3f} (wanted <= {R_HAT_THRESHOLD}), min bulk ESS {ess:.0f} (wanted >= "
        f"{ESS_THRESHOLD}) over the coalition posteriors"
        + (f", {rerun} of them sampled again with longer chains" if rerun else "")
        + f".\nWall-clock time of the valuation{' and rewards' if result.rewards is not None else ''}: {elapsed:.1f} s "
        "(sampling and compiling; reading the data and this report not included)"
    )
    if save:
        _save(result, save)
    return result


def _plus_minus_meaning(sources: str) -> list[str]:
    """What the ± of the tables is, and what it leaves out (release-to-release variability, measured once by
    benchmarks/bench_release_spread.py)."""
    text = (
        f"± is the Monte Carlo error given these releases: the standard error of the estimate over {sources}, "
        "with each party's noisy release held fixed. It leaves out release-to-release "
        "variability: a fresh release of the same data draws new privacy noise and moves the values by more (over "
        f"{SPREAD_RELEASES} fresh releases of the demo's setting, each party's phi had a standard deviation of "
        f"{SPREAD_PHI}; README.md, docs/benchmarks.md)."
    )
    return textwrap.wrap(text, width=116)


def _privacy_lines(result: bv.ValuationResult) -> list[str]:
    """One line per owner: the guarantee it declared for its releases first, then dp-accounting's conversion of
    their composition to the other notion ((epsilon, delta)-DP for a Renyi DP declaration, and back)."""
    lines = []
    for owner, spent in result.privacy_spent().items():
        guarantees = [r.guarantee for r in result.privacy.releases if r.owner == owner]
        declared = ", ".join(dict.fromkeys(g.describe() for g in guarantees))
        count = f"{spent.releases} release{'s' if spent.releases != 1 else ''}"
        rdp = f"({spent.rdp_order:g}, {spent.rdp_epsilon:.4g})-RDP"
        approx = f"({spent.epsilon:.4g}, {spent.delta:g})-DP"
        if all(g.is_rdp for g in guarantees):
            composed = f"; composed: {rdp}" if spent.releases > 1 else ""
            converted = f"as a conversion to (epsilon, delta)-DP: {approx} ({spent.accountant} accountant)"
        else:
            composed = f"; composed: {approx} ({spent.accountant} accountant)" if spent.releases > 1 else ""
            converted = f"as a conversion to Renyi DP: {rdp}"
        lines.append(f"  {owner}: declared {declared} ({count}){composed}; {converted}")
    return lines


def _delta_meaning(result: bv.ValuationResult) -> list[str]:
    """Where the delta of a Renyi DP owner's conversion comes from: nobody declared it (`PrivacyLedger.spent`)."""
    converted = [o for o in result.privacy.owners if all(g.is_rdp for g in _guarantees(result, o))]
    if not converted:
        return []
    delta = result.privacy_spent()[converted[0]].delta
    text = (
        f"  delta = {delta:g} in the conversions was declared by nobody: a Renyi DP guarantee has no delta, and its "
        f"conversion to (epsilon, delta)-DP must pick one; bayesval states it at delta = {delta:g} "
        "(result.privacy_spent(delta=...) states it at another). The declared guarantee is the one that holds."
    )
    return textwrap.wrap(text, width=116, subsequent_indent="  ")


def _guarantees(result: bv.ValuationResult, owner: str) -> list:
    return [r.guarantee for r in result.privacy.releases if r.owner == owner]


def _reward_legend(symbol: str, repaired: bool) -> list[str]:
    """What each column of the reward table means (Sim et al. 2023, Sec. 5 and 5.4); `repaired`: whether negative
    Shapley values were repaired (`bayesval.rewards.nonnegative_shapley`)."""
    parameter = {
        "kappa": "kappa      the tempering factor of the party's reward posterior: 1 is the grand coalition's "
        "posterior, smaller is flatter (less information)",
        "tau": "tau        the scale of the extra noise added to the releases for the party's reward: 0 is the grand "
        "coalition's posterior, larger is less information",
    }[symbol]
    return [
        "Columns:",
        "  shapley    phi_i, the Shapley value the target is computed from"
        + (" (negative values repaired: phi' = (1 - w) phi + w v_i, see the warning above)" if repaired else ""),
        "  own value  v_i, the surprise of the party's own posterior p(theta | o_i)",
        "  target     r*_i = v_N (phi_i / max phi)^rho, the surprise the party's reward should have",
        f"  reward     r_i, the surprise of the reward's posterior samples, with its {PLUS_MINUS}",
        f"  {parameter}",
        "  calls      sampler calls the party's search made (0: none needed, the top party gets the grand coalition's "
        "posterior)",
        "  reached    whether |r_i - r*_i| came within the search's tolerance",
        "  similarity r'_i = -KL(p(theta | o_N) || q_i): 0 for the grand coalition's posterior, more negative the "
        "further the reward is from it",
    ]


def _check_guarantee_options(delta: float | None, rdp_order: float | None) -> None:
    """--rdp-order declares a Renyi DP release, --delta an (epsilon, delta)-DP one: not both."""
    if delta is not None and rdp_order is not None:
        raise ValueError(
            f"--rdp-order {rdp_order:g} sets the order of a Renyi DP release, --delta {delta:g} makes it (epsilon, "
            "delta)-DP, which has no order: give one of them"
        )


def _check_outputs(inputs: tuple[str, ...] = (), force: bool = False, **paths: str | None) -> None:
    """Refuse a --save or --plot path that could not be written, that does not end as a result (.npz) or an image
    does, that is one of the command's `inputs` (a release file cannot be made again without spending privacy
    again), or that exists unless `force` (--force: a saved result may hold the only record of the releases a
    valuation of tables made), before the work whose result it would keep."""
    for option, path in paths.items():
        if path is None:
            continue
        written = check_output_path(f"--{option}", path, suffixes=IMAGE_SUFFIXES if option == "plot" else (".npz",))
        given = next((text for text in inputs if Path(text).resolve() == written.resolve()), None)
        if given is not None:
            raise ValueError(f"--{option} {path!r} is {given!r}, an input of this command; choose another file name")
        _not_overwritten(f"--{option}", path, written, force)


def _release_output(path: str, force: bool) -> Path:
    """The release file's path, checked before the release spends the party's privacy budget: writable, not named
    like a table (`valuate` would read it as one), and not an existing file unless `force`."""
    output = check_output_path("-o", path)
    if is_table(output):
        raise ValueError(
            f"-o {path!r} is named like a data table ({', '.join(TABLE_SUFFIXES)}), which bayesval valuate would read "
            "as one; name the release file NAME.release.json"
        )
    _not_overwritten("-o", path, output, force)
    return output


def _not_overwritten(option: str, path: str, written: Path, force: bool) -> None:
    """Refuse an output file `written` (given as `path` to `option`) that exists, unless `force` (--force)."""
    if written.exists() and not force:
        raise ValueError(f"{option} {path!r} already exists; choose another file name, or add --force to overwrite it")


def _check_target(model: str, targets: list, column: str) -> None:
    """A classifier's target column holds class labels: -1/0/1 for --model logistic (the party refuses a mix of
    0/1 and -1/+1), integers for knn."""
    if model in ("logistic", "knn"):
        for path, y in targets:
            if model == "logistic":
                check_class_labels(path, column, y, (-1.0, 0.0, 1.0), "0/1 (or -1/+1) labels for --model logistic")
                if np.any(y == 0) and np.any(y == -1):
                    zero, minus = (int(np.flatnonzero(y == label)[0]) + 1 for label in (0, -1))
                    raise ValueError(
                        f"{path}: target column {column!r} mixes 0/1 and -1/+1 labels (row {zero} holds 0, row {minus} "
                        "holds -1); code the classes one way"
                    )
            else:
                check_class_labels(path, column, y)


def _check_bounds(model: str, bounds: bv.Bounds) -> None:
    """--model linear bounds the target as well as the features."""
    if model == "linear" and bounds.y_abs is None:
        raise ValueError(
            f"--bounds {bounds.x_norm:g} bounds the features only; --model linear also needs a bound on the target: "
            "--bounds X_NORM,Y_ABS"
        )


def _check_knn_classes(train: str, validation: str, column: str, y_train: np.ndarray, y_val: np.ndarray) -> None:
    """The training file holds two classes at least, and the validation file no class the training file lacks."""
    classes = np.unique(y_train)
    if classes.size < 2:
        raise ValueError(f"{train}: target column {column!r} holds a single class ({classes[0]:g}); KNN needs two")
    unseen = ~np.isin(y_val, classes)
    if unseen.any():
        row = int(np.flatnonzero(unseen)[0])
        raise ValueError(
            f"{validation}: target column {column!r} holds {np.unique(y_val[unseen]).size} class(es) that {train} "
            f"does not have (row {row + 1} holds {y_val[row]:g}; {train} has {', '.join(f'{c:g}' for c in classes[:6])}"
            f"{' ...' if classes.size > 6 else ''})"
        )


def _no_table_options(options: dict) -> None:
    """Refuse the data-table options given with release files: each release carries its own, so they would be
    ignored without a word."""
    given = [f"--{option.replace('_', '-')}" for option, value in options.items() if value is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)} apply to data tables (.csv / .parquet) released here; release files carry their own "
            "target, features, privacy and bounds: drop " + ("it" if len(given) == 1 else "them")
        )


def _releases_model(files: list[str], releases: list, model: str | None) -> str:
    """The model the releases' statistics are for (`model` if given): every party must release the same one."""
    kinds = [(r.statistic or {}).get("kind") for r in releases]
    if len(set(kinds)) > 1:
        held = "; ".join(f"{file}: {kind}" for file, kind in dict(zip(files, kinds)).items())
        raise ValueError(
            f"the release files hold statistics of different models ({held}); a valuation compares parties that "
            "released the same model's statistic: value each model's files separately, or have the parties release "
            "again with one --model"
        )
    known = {v: k for k, v in MODELS.items()}
    if model is None and kinds[0] not in known:
        raise ValueError(f"the releases hold a {kinds[0]} statistic, which --model cannot choose ({', '.join(MODELS)})")
    return model or known[kinds[0]]


def _at_least_one(text: str) -> int:
    """An integer >= 1 (argparse type)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return number


def _file_name(option: str, name: str) -> str:
    """`name` as a party name that is also a plain file name: the release file NAME.release.json stays in the working
    directory (no path separator, not '.' or '..', not empty)."""
    if not name.strip():
        raise ValueError(f"{option} must not be empty")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(
            f"{option} {name!r} is not a plain name: the release file NAME.release.json is named after it and stays in "
            "the working directory, so a name holds no '/' or '\\' and is not '.' or '..' (-o PATH chooses the file)"
        )
    return name


def _positive(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return number


def _class_labels(text: str) -> list[float]:
    """'0,1,2' as class labels: distinct integers, two at least (argparse type)."""
    try:
        labels = [float(part) for part in text.split(",")]
    except ValueError:
        labels = []
    if len(labels) < 2 or len(set(labels)) != len(labels) or any(label != round(label) for label in labels):
        raise argparse.ArgumentTypeError(f"must be two or more distinct integer class labels, e.g. 0,1; got {text!r}")
    return labels


def _listed(labels: list[float]) -> str:
    return ",".join(f"{label:g}" for label in labels)


def _columns(text: str) -> list[str]:
    """'a,b,c' as column names."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"features must be comma-separated column names, got {text!r}")
    return names


def _bounds(text: str) -> bv.Bounds:
    """'X_NORM' or 'X_NORM,Y_ABS' as Bounds."""
    parts = text.split(",")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bounds must be X_NORM or X_NORM,Y_ABS (numbers), got {text!r}") from None
    if len(numbers) > 2:
        raise argparse.ArgumentTypeError(f"bounds must be X_NORM or X_NORM,Y_ABS, got {text!r}")
    try:
        return bv.Bounds(*numbers)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "expected one argument" also says why a value may have gone missing: one that starts
    with '-' and is not a plain number (`--bounds -1,2`) is read as an option."""

    def error(self, message: str):
        if message.endswith("expected one argument"):
            message += " (a value that starts with '-' is read as an option: write it as --OPTION=VALUE)"
        super().error(message)


def main(argv: list[str] | None = None) -> None:
    parser = _Parser(prog="bayesval", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for add_command in (_add_demo, _add_release, _add_valuate, _add_knn, _add_keygen):
        add_command(commands)
    args = parser.parse_args(argv)
    if holds_no_party_data(args):
        use_persistent_cache()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            args.run(args)
    except (ValueError, TypeError, OSError) as error:  # a file that cannot be read or written, in one line
        print(f"bayesval {args.command}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command's own line on stderr (`warning: ...`, as `release` prints its party's), not Python's
    report of the file and line that raised it."""
    print(f"warning: {message}", file=sys.stderr if file is None else file)


def holds_no_party_data(args: argparse.Namespace) -> bool:
    """Whether the command's process holds no party's data, so that its compiled programs may be kept on disk for
    the next run (`bayesval.compilation.use_persistent_cache`): the demo (synthetic parties) and the valuation of
    release files, not of data tables, nor the party side's commands."""
    return args.command == "demo" or (args.command == "valuate" and not any(is_table(f) for f in args.files))


def _add_demo(commands) -> None:
    run = commands.add_parser("demo", help="value three private parties on the Syn setting")
    bv.SamplerConfig.add_arguments(run)
    run.add_argument("--tolerance", type=_positive, default=None, help=TOLERANCE_HELP)
    run.add_argument("--seed", type=int, default=0, help="data and sampler seed (privacy noise is OS entropy)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--save", default=None, help="write the result to this .npz file")
    run.add_argument("--force", action="store_true", help="overwrite the --save file if it exists")
    run.set_defaults(run=lambda args: demo(args.seed, not args.no_progress, args.save, budget=args, force=args.force))


def _add_release(commands) -> None:
    out = commands.add_parser(
        "release",
        help="party side: release a statistic of a CSV file",
        description="Release the party's noisy sufficient statistic to a file, and show (here only) how much of it "
        "survives the noise: a signal-to-noise figure per block, with a warning when it carries little information.",
    )
    out.add_argument(
        "data", help="CSV / Parquet file of the party's records (one column the target, the rest features)"
    )
    out.add_argument(
        "--model",
        required=True,
        choices=sorted(MODELS),
        help="which model's statistic to release: linear (Bayesian linear regression) or logistic (labels 0/1)",
    )
    out.add_argument("--target", required=True, help="the target column (regression target or 0/1 label)")
    out.add_argument("--features", type=_columns, default=None, help=FEATURES_HELP)
    out.add_argument("--epsilon", type=float, required=True, help=EPSILON_HELP)
    out.add_argument("--delta", type=float, default=None, help=DELTA_HELP)
    out.add_argument("--rdp-order", type=float, default=None, help=RDP_ORDER_HELP)
    out.add_argument("--bounds", type=_bounds, required=True, help=BOUNDS_HELP)
    out.add_argument(
        "--name", default=None, help="the party's name in the release and the results (default: the file's)"
    )
    out.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        help="seed the privacy noise: reproducible but removable, experiments only",
    )
    out.add_argument(
        "--experiment", action="store_true", help="mark the release as an experiment (needed with --noise-seed)"
    )
    out.add_argument(
        "--grid",
        type=float,
        default=None,
        help="step of the grid the statistic is rounded to before integer (discrete Gaussian) noise, a power of two "
        "(default: chosen from the sensitivity)",
    )
    out.add_argument("-o", "--output", default=None, help="release file (default NAME.release.json)")
    out.add_argument("--sign", default=None, metavar="KEYFILE", help="sign the file with this private key (keygen)")
    out.add_argument("--force", action="store_true", help="overwrite the release file if it exists")
    out.set_defaults(
        run=lambda args: release(
            args.data,
            model=args.model,
            target=args.target,
            epsilon=args.epsilon,
            bounds=args.bounds,
            output=args.output,
            name=args.name,
            features=args.features,
            delta=args.delta,
            rdp_order=args.rdp_order,
            noise_seed=args.noise_seed,
            experiment=args.experiment,
            grid=args.grid,
            sign=args.sign,
            force=args.force,
        )
    )


def _add_valuate(commands) -> None:
    value = commands.add_parser("valuate", help="mediator side: value the parties of release files or data tables")
    value.add_argument("files", nargs="+", help="release files (`bayesval release`), or one CSV / Parquet per party")
    value.add_argument(
        "--model",
        default=None,
        choices=sorted(MODELS),
        help="the model the parties are valued under (default: read from the release files; needed for data tables)",
    )
    value.add_argument("--seed", type=int, default=0, help="sampler seed (privacy noise never comes from it)")
    value.add_argument("--tolerance", type=_positive, default=None, help=TOLERANCE_HELP)
    value.add_argument("--no-progress", action="store_true", help="hide progress bars")
    value.add_argument("--save", default=None, help="write the result to this .npz file")
    value.add_argument("--plot", default=None, help="write the result's figure to this file (.png, .pdf, .svg)")
    value.add_argument("--force", action="store_true", help=FORCE_HELP)
    value.add_argument(
        "--verify",
        nargs="+",
        action="extend",
        default=None,
        metavar="KEYS",
        help="the parties' public keys: .pub files, keyring files or folders of .pub files; every release file must "
        "then be signed by its party's key",
    )
    value.add_argument(
        "--rewards",
        default=None,
        choices=["tempering", "noise"],
        help="also reward each party with posterior samples that meet its rho-Shapley target (Sim et al. 2023, "
        "Sec. 5): by likelihood tempering or by noise addition; printed, and saved with --save",
    )
    value.add_argument(
        "--rho",
        type=float,
        default=None,
        help="rho of the reward targets r*_i = v_N (phi_i / max phi)^rho, in (0, 1]: smaller gives more equal rewards "
        "(default 0.2; needs --rewards)",
    )
    bv.SamplerConfig.add_arguments(value)
    tables = value.add_argument_group("data tables, released here in-process (one trusted machine)")
    tables.add_argument("--target", default=None, help="the target column")
    tables.add_argument("--features", type=_columns, default=None, help=FEATURES_HELP)
    tables.add_argument("--epsilon", type=float, default=None, help="each party's " + EPSILON_HELP)
    tables.add_argument("--delta", type=float, default=None, help=DELTA_HELP)
    tables.add_argument("--rdp-order", type=float, default=None, help=RDP_ORDER_HELP)
    tables.add_argument("--bounds", type=_bounds, default=None, help=BOUNDS_HELP)
    table_options = ("target", "features", "epsilon", "delta", "rdp_order", "bounds")
    value.set_defaults(
        run=lambda args: valuate_files(
            args.files,
            model=args.model,
            seed=args.seed,
            progress_bar=not args.no_progress,
            save=args.save,
            budget=args,
            plot=args.plot,
            table_options={option: getattr(args, option) for option in table_options},
            verify=args.verify,
            rewards=args.rewards,
            rho=args.rho,
            force=args.force,
        )
    )


def _add_knn(commands) -> None:
    points = commands.add_parser("knn", help="value each training row by KNN- or (DP-)TKNN-Shapley")
    points.add_argument("train", help="CSV / Parquet of the training rows")
    points.add_argument("--validation", required=True, help="CSV / Parquet of the validation rows (same columns)")
    points.add_argument("--target", required=True, help="the label column")
    points.add_argument("--features", type=_columns, default=None, help=FEATURES_HELP)
    points.add_argument("--method", default="knn", choices=["knn", "tknn"], help="KNN-Shapley or TKNN-Shapley")
    points.add_argument("--k", type=_at_least_one, default=None, help=f"neighbours (knn; default {DEFAULT_NEIGHBOURS})")
    points.add_argument(
        "--tau", type=float, default=None, help=f"threshold on cosine distance - 1 (tknn; default {DEFAULT_TAU})"
    )
    points.add_argument(
        "--epsilon", type=float, default=None, help="epsilon of (epsilon, delta)-DP: DP-TKNN-Shapley (with --delta)"
    )
    points.add_argument("--delta", type=float, default=None, help="delta of (epsilon, delta)-DP (with --epsilon)")
    points.add_argument(
        "--classes",
        type=_class_labels,
        default=None,
        help="the public class labels, e.g. 0,1 (C = their number; required with --epsilon; default: the training "
        "file's labels)",
    )
    points.add_argument("--save", default=None, help="write the result to this .npz file")
    points.add_argument("--plot", default=None, help="write the result's figure to this file")
    points.add_argument("--force", action="store_true", help=FORCE_HELP)
    points.set_defaults(
        run=lambda args: knn(
            args.train,
            validation=args.validation,
            target=args.target,
            features=args.features,
            method=args.method,
            neighbours=args.k,
            tau=args.tau,
            epsilon=args.epsilon,
            delta=args.delta,
            save=args.save,
            plot=args.plot,
            force=args.force,
            classes=args.classes,
        )
    )


def _add_keygen(commands) -> None:
    keys = commands.add_parser("keygen", help="party side: a key pair to sign release files with")
    keys.add_argument("path", help="writes PATH.key (private, mode 0600) and PATH.pub (public, for the mediator)")
    keys.add_argument("--name", default=None, help="the party's name, as its release files give it (default: PATH's)")
    keys.set_defaults(run=lambda args: keygen(args.path, args.name))


if __name__ == "__main__":
    main()
