"""The `bayesval` command: `demo` (a real private valuation on Sim et al.'s Syn setting), `release` (a party
releases its statistic from a CSV file on its own machine) and `valuate` (the mediator values release files).

    bayesval release party_a.csv --model linear --target y --epsilon 0.5 --bounds 1,2 -o party_a.release.json
    bayesval valuate party_a.release.json party_b.release.json party_c.release.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import bayesval as bv
from bayesval.boundary import PerturbedStatistic
from bayesval.datasets.synthetic import make_syn

MODELS = {"linear": "linear_regression", "logistic": "logistic_regression"}
BUDGET_FIELDS = ("num_chains", "num_warmup", "num_samples", "thinning", "num_repeats")


def demo(preset: str, seed: int, progress_bar: bool, save: str | None) -> bv.ValuationResult:
    """Syn: parties of 100 / 200 / 400 points at epsilon = (0.2, 0.1, 0.2), lambda = 2 (spec Sec. 6).

    The parties' privacy noise comes from OS entropy, so each run is a new private release; `seed`
    fixes the data and the sampler only.
    """
    syn = make_syn(seed=seed)
    epsilons = (0.2, 0.1, 0.2)
    parties = [
        bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}")
        for i, ((X, y), eps) in enumerate(zip(syn.parties, epsilons))
    ]
    print(f"Syn setting: {[len(p.X) for p in parties]} points, epsilon = {epsilons}, bounds {syn.bounds}")
    return _valuate_and_report(bv.models.LinearRegression(), parties, seed, preset, progress_bar, save)


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
    rdp_order: float,
    noise_seed: int | None,
) -> Path:
    """Party side: read the party's CSV, clip, compute and perturb its statistic, write the release file."""
    import pandas as pd

    path = Path(data)
    if not path.is_file():
        raise SystemExit(f"bayesval release: {path} does not exist")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise SystemExit(f"bayesval release: cannot read {path} as CSV: {error}") from None
    if frame.empty:
        raise SystemExit(f"bayesval release: {path} has no records (a header at most)")
    if target not in frame.columns:
        raise SystemExit(f"bayesval release: {path} has no column {target!r}; columns: {list(frame.columns)}")
    columns = features or [c for c in frame.columns if c != target]
    unknown = [c for c in columns if c not in frame.columns]
    if unknown:
        raise SystemExit(f"bayesval release: {path} has no columns {unknown}")
    non_numeric = [c for c in [*columns, target] if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise SystemExit(f"bayesval release: columns {non_numeric} of {path} are not numeric")
    name = name or path.name.split(".")[0]
    party = bv.Party(
        frame[columns].to_numpy(np.float64),
        frame[target].to_numpy(np.float64),
        epsilon=epsilon,
        bounds=bounds,
        name=name,
        delta=delta,
        rdp_order=rdp_order,
        noise_seed=noise_seed,
    )
    statistic = _model(model).statistic(party.num_features)
    released = party.release(statistic)
    output_path = released.save(output or f"{name}.release.json")
    print(
        f"{name}: released a {MODELS[model]} statistic of {released.count} records under "
        f"{party.guarantee.describe()} (noise std {released.noise_std:.4g}) to {output_path}"
    )
    return output_path


def valuate_files(
    files: list[str],
    *,
    model: str | None,
    preset: str,
    seed: int,
    progress_bar: bool,
    save: str | None,
    budget: dict | None = None,
) -> bv.ValuationResult:
    """Mediator side: value the parties of the given release files (`budget` overrides the preset's fields)."""
    releases = [PerturbedStatistic.load(f) for f in files]
    kinds = {(r.statistic or {}).get("kind") for r in releases}
    if model is None:
        known = {v: k for k, v in MODELS.items()}
        if len(kinds) != 1 or next(iter(kinds)) not in known:
            raise SystemExit(f"bayesval valuate: the releases hold {sorted(map(str, kinds))} statistics; pass --model")
        model = known[next(iter(kinds))]
    print(f"{len(releases)} releases: {', '.join(r.owner for r in releases)}")
    model = _model(model)
    config = bv.SamplerConfig.preset(preset, model.sampler).with_(**(budget or {}))
    return _valuate_and_report(model, releases, seed, config, progress_bar, save)


def _model(name: str):
    return bv.models.LinearRegression() if name == "linear" else bv.models.LogisticRegression()


def _valuate_and_report(model, parties, seed: int, config, progress_bar: bool, save: str | None):
    start = time.perf_counter()
    result = bv.valuate(model, parties, key=seed, config=config, progress_bar=progress_bar)
    elapsed = time.perf_counter() - start
    print("\nBayesian surprise v_C = KL(p(theta | o_C) || p(theta)) of every coalition (nats, mean ± s.e.):")
    print(result.coalitions_dataframe().to_string(float_format=lambda v: f"{v:.3f}"))
    print("\nShapley values:")
    print(result.to_dataframe().to_string(float_format=lambda v: f"{v:.3f}"))
    print("\nPrivacy spent (dp-accounting's composition of each party's releases):")
    for owner, spent in result.privacy_spent().items():
        print(f"  {owner}: {spent}")
    worst = max(result.diagnostics["r_hat"])
    print(f"\nmax R-hat {worst:.3f}, min ESS {min(result.diagnostics['ess']):.0f}; {elapsed:.1f} s")
    if save:
        print(f"saved to {result.save(save)}")
    return result


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="bayesval", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("demo", help="value three private parties on the Syn setting")
    run.add_argument("--preset", default="fast", choices=["fast", "paper"], help="sampler budget")
    run.add_argument("--seed", type=int, default=0, help="data and sampler seed (privacy noise is OS entropy)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--save", default=None, help="write the result to this .npz file")

    out = commands.add_parser("release", help="party side: release a statistic of a CSV file")
    out.add_argument("data", help="CSV file of the party's records (one column the target, the rest features)")
    out.add_argument("--model", required=True, choices=sorted(MODELS), help="which statistic to release")
    out.add_argument("--target", required=True, help="the target column (regression target or 0/1 label)")
    out.add_argument("--features", default=None, help="comma-separated feature columns (default: all others)")
    out.add_argument("--epsilon", type=float, required=True)
    out.add_argument("--delta", type=float, default=None, help="(epsilon, delta)-DP instead of RDP")
    out.add_argument("--rdp-order", type=float, default=2.0, help="RDP order lambda (default 2, Sim et al.)")
    out.add_argument("--bounds", type=_bounds, required=True, help="declared bounds X_NORM or X_NORM,Y_ABS")
    out.add_argument("--name", default=None, help="the party's name (default: the file's name)")
    out.add_argument("--noise-seed", type=int, default=None, help="reproducible noise, for experiments only")
    out.add_argument("-o", "--output", default=None, help="release file (default NAME.release.json)")

    value = commands.add_parser("valuate", help="mediator side: value the parties of release files")
    value.add_argument("files", nargs="+", help="release files written by `bayesval release`")
    value.add_argument("--model", default=None, choices=sorted(MODELS), help="default: from the releases")
    value.add_argument("--preset", default="fast", choices=["fast", "paper"], help="sampler budget")
    value.add_argument("--seed", type=int, default=0, help="sampler seed")
    value.add_argument("--no-progress", action="store_true", help="hide progress bars")
    value.add_argument("--save", default=None, help="write the result to this .npz file")
    for field in BUDGET_FIELDS:
        value.add_argument(f"--{field.replace('_', '-')}", type=int, default=None, help="overrides the preset")

    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.preset, args.seed, not args.no_progress, args.save)
        elif args.command == "release":
            release(
                args.data,
                model=args.model,
                target=args.target,
                epsilon=args.epsilon,
                bounds=args.bounds,
                output=args.output,
                name=args.name,
                features=None if args.features is None else args.features.split(","),
                delta=args.delta,
                rdp_order=args.rdp_order,
                noise_seed=args.noise_seed,
            )
        else:
            valuate_files(
                args.files,
                model=args.model,
                preset=args.preset,
                seed=args.seed,
                progress_bar=not args.no_progress,
                save=args.save,
                budget={f: getattr(args, f) for f in BUDGET_FIELDS if getattr(args, f) is not None},
            )
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"bayesval {args.command}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
