"""One Gibbs call with its rows split over one CPU device per core (`bayesval.inference.batching.use_cpu_cores`)
against the same call on one device, alternating in one process, so that both are read on one machine at one time.

The call is the demo's valuation call: Syn's 7 coalitions x 3 repeats (parties of 100 / 200 / 400 points at
epsilon = 0.2 / 0.1 / 0.2, fixed noise seeds), padded to a multiple of the devices, at the `fast` preset. Both
programs are compiled before the timed calls. Prints each call's wall and CPU time and whether its draws equal the
other layout's to the last bit, then the ratio of the median wall times.

    python benchmarks/bench_cpu_devices.py [--calls 4]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import jax
import numpy as np

from bayesval.inference.batching import shard_rows, use_cpu_cores


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=4, help="timed calls of each layout")
    args = parser.parse_args()
    devices = use_cpu_cores()  # before anything below starts the backend
    if devices < 2:
        raise SystemExit(f"one CPU device here ({devices}): nothing to split the rows over")

    import bayesval as bv
    from bayesval.batching import padded_size
    from bayesval.datasets.synthetic import make_syn
    from bayesval.games.masks import coalition_masks
    from bayesval.inference.data import NoiseAwareData

    syn = make_syn(seed=0)
    parties = [
        bv.Party(X, y, epsilon=epsilon, rdp_order=2.0, bounds=syn.bounds, name=f"party {i}", noise_seed=100 + i)
        for i, ((X, y), epsilon) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2)))
    ]
    data = NoiseAwareData.from_releases([party.release() for party in parties])
    masks = np.repeat(coalition_masks(3), 3, axis=0)
    masks = np.vstack([masks, masks[: padded_size(len(masks), devices) - len(masks)]])
    keys = jax.random.split(jax.random.key(0), len(masks))
    model = bv.models.LinearRegression()
    config = bv.SamplerConfig.preset("fast", "gibbs").with_(progress_bar=False)

    def call(split: bool) -> tuple[float, float, np.ndarray]:
        row_keys, row_masks = shard_rows(keys, masks) if split else (keys, masks)
        started, cpu = time.perf_counter(), cpu_seconds()
        draws = np.asarray(model.posterior_draws(row_keys, data, row_masks, config).draws)
        return time.perf_counter() - started, cpu_seconds() - cpu, draws

    layouts = {f"{devices} devices": True, "1 device": False}
    reference = {label: call(split)[2] for label, split in layouts.items()}  # compiles both programs
    print(
        f"{len(masks)} rows, {config.num_chains} chains, {config.num_warmup} + {config.num_samples} sweeps; draws "
        f"equal in both layouts: {np.array_equal(*reference.values())}"
    )
    walls: dict[str, list[float]] = {label: [] for label in layouts}
    for index in range(args.calls):
        for label, split in layouts.items():
            wall, cpu, draws = call(split)
            walls[label].append(wall)
            same = np.array_equal(draws, reference[label])
            print(f"call {index + 1}, {label}: {wall:6.2f} s wall, {cpu:6.2f} s CPU, same draws {same}", flush=True)
    medians = [statistics.median(times) for times in walls.values()]
    print(f"median wall: {medians[0]:.2f} s over {devices} devices, {medians[1]:.2f} s on one")
    print(f"{devices} devices / 1 device: {medians[0] / medians[1]:.3f} of the median wall time")


if __name__ == "__main__":
    main()
