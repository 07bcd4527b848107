"""Where the spread of a coalition value's repeats comes from: Syn's three parties valued with many repeats, each
repeat from fresh chains, at a chosen k-NN neighbour count, chain length and key scheme, one fresh process a setting.

    python benchmarks/bench_repeat_spread.py                                   # the four settings below
    python benchmarks/bench_repeat_spread.py --settings "k=4 samples=1600 keys=row" --repeats 24

A setting is `k=K samples=S keys=row|common`: K neighbours in the k-NN KL estimate, S kept sweeps a chain (the fast
preset's 4 chains and 800 warm-up sweeps otherwise), and each row's chains on a key of its own (`row`, the package's
`coalition_keys`) or the same key for every coalition of a repeat (`common`: common random numbers, which would let
the Shapley values' differences cancel the chains' noise if coalitions' estimates came out correlated). For each it
prints the standard deviation over repeats of every coalition value and of every party's Shapley value (Shapley is
linear, so a repeat's Shapley values are those of its coalition values, `exact_shapley_per_repeat`), the mean
correlation between two coalitions' repeat estimates, and the `bv.valuate` time. With 12 repeats a standard deviation
is known to about +-21 %.

Syn's release is `bench_valuation.py`'s (fixed noise seeds, epsilon 0.2, 0.1, 0.2), key 0, no reruns.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

SETTINGS = ("k=4 samples=1600 keys=row", "k=16 samples=1600 keys=row", "k=4 samples=1600 keys=common")
SETTINGS += ("k=4 samples=6400 keys=row",)


def child(setting: dict, repeats: int) -> None:
    """One valuation in this process; prints a JSON line."""
    import bayesval as bv
    from bayesval.games.shapley import exact_shapley_per_repeat
    from bayesval.parties import keys, surprise

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_valuation import syn_parties

    if setting["keys"] == "common":
        row_keys = keys.coalition_keys
        keys.coalition_keys = lambda key, codes, repeats: row_keys(key, [0] * len(codes), repeats)
    estimates, file = {}, surprise.CoalitionSurprise._file

    def filing(self, code, run):
        estimates[code] = np.asarray(run.kl)
        return file(self, code, run)

    surprise.CoalitionSurprise._file = filing
    config = bv.SamplerConfig.preset("fast").with_(
        num_samples=int(setting["samples"]), num_repeats=repeats, reruns=0, progress_bar=False
    )
    releases = [party.release() for party in syn_parties()]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bv.valuate(bv.models.LinearRegression(), releases, key=0, config=config, k=int(setting["k"]))
    seconds = time.perf_counter() - start
    table = np.zeros((repeats, 2 ** len(releases)))  # the empty coalition's value is 0 in every repeat
    for code, kl in estimates.items():
        table[:, code] = kl
    values = table[:, 1:].T
    correlation = np.corrcoef(values)[np.triu_indices(len(values), 1)].mean()
    record = {
        "seconds": seconds,
        "coalition_sd": values.std(axis=1, ddof=1).tolist(),
        "shapley_sd": exact_shapley_per_repeat(table).std(axis=0, ddof=1).tolist(),
        "correlation": float(correlation),
    }
    print(json.dumps(record))


def parse(setting: str) -> dict:
    parsed = dict(part.split("=") for part in setting.split())
    if set(parsed) != {"k", "samples", "keys"} or parsed["keys"] not in ("row", "common"):
        raise SystemExit(f"a setting is 'k=K samples=S keys=row|common', got {setting!r}")
    return parsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(parse(args.settings[0]), args.repeats)
    from bench_compile import run_json

    print(f"Syn, 3 parties, fast preset's chains, {args.repeats} repeats, key 0; standard deviations over repeats:")
    for setting in args.settings:
        parse(setting)
        command = [sys.executable, __file__, "--child", "--settings", setting, "--repeats", str(args.repeats)]
        result = run_json(command, None)
        print(
            f"  {setting:<30} bv.valuate {result['seconds']:6.1f} s   coalition values "
            f"{np.round(result['coalition_sd'], 4).tolist()}   Shapley values "
            f"{np.round(result['shapley_sd'], 4).tolist()}   mean correlation {result['correlation']:+.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
