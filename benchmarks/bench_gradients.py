"""Gradient-trajectory semivalues (issue 16): speed against a straightforward PyTorch per-step loop of the same
computation (the way the paper's Opacus code runs), in one run, printing the ratio; and the paper's experiments.

    python benchmarks/bench_gradients.py speed                        # k = 1000 permutations x 400 parties, X*
    python benchmarks/bench_gradients.py speed --permutations 100     # quick look
    python benchmarks/bench_gradients.py variance   # DP variance and mean-adjusted variance against k (Table 1)
    python benchmarks/bench_gradients.py variance --sweep   # ... over learning rates, epsilon 1 and 10, and Fig. 2
    python benchmarks/bench_gradients.py detection  # mislabel detection AUROC table (Table 2's protocol)
    python benchmarks/bench_gradients.py detection --dataset digits   # or 2dplanes, phoneme, ... (shared OpenML)

Both sides: breast_cancer standardised, 400 single-point parties, the remaining 169 rows as the test set,
multinomial logistic regression, per-party clipped gradient + Gaussian noise at (1, 5e-5)-DP over k releases,
X* running-mean release, V = negated test cross-entropy after every step. bayesval's noise is its private path's:
the Gaussian rounded to a grid, drawn exactly on the host before the program (timed apart); PyTorch's is float
noise, as DP-SGD libraries add it. The PyTorch loop is timed on the first
`--torch-permutations` permutations and scaled to k (its cost per permutation is constant). torch is optional:
without it only the JAX side is printed.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.datasets.openml import OPENML_DATASETS, load_openml
from bayesval.estimators import (
    LinearModel,
    LogisticModel,
    gradient_marginals,
)
from bayesval.experiments import (
    dp_variance_by_k,
    fitted_slope,
    mislabel_detection,
    standardise,
)
from bayesval.games import beta_shapley
from bayesval.privacy import DPGuarantee, Mechanism
from bayesval.privacy.rounded_gaussian import RandomWords, RoundedGaussianSampler


def data(num_parties: int, dataset: str = "breast_cancer", test_size: int = 1000):
    """A random split: `num_parties` training rows and up to `test_size` test rows, standardised."""
    if dataset in OPENML_DATASETS:
        X, y = load_openml(dataset)  # from $BAYESVAL_DATA/openml
    else:
        X, y = {"breast_cancer": load_breast_cancer, "digits": load_digits}[dataset](return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:num_parties], order[num_parties : num_parties + test_size]
    X_train, X_test = standardise(X[train], X[test])
    return X_train, y[train], X_test, y[test]


def jax_run(X, y, X_test, y_test, k, learning_rate, dtype):
    """The private trajectories as `GradientSemivalues` runs them: (seconds drawing the exact integer noise, seconds
    of the warm program, seconds of its first call with compilation, marginals)."""
    model = LogisticModel(X.shape[1], 2)
    mechanism = Mechanism.gaussian_on_grid(
        DPGuarantee(1.0, 5e-5), 1.0, model.num_parameters, num_compositions=k, adjacency="add-or-remove-one"
    )
    inputs = (
        jnp.asarray(X[:, None, :], dtype),
        jnp.asarray(y[:, None]),
        jnp.asarray(X_test, dtype),
        jnp.asarray(y_test),
    )
    shape = (k, X.shape[0], model.num_parameters)

    def draw(seed):
        sampler = RoundedGaussianSampler(RandomWords(b"bench %d" % seed))
        return jnp.asarray(sampler.sample(mechanism.grid_steps, int(np.prod(shape))).reshape(shape), jnp.int32)

    def run(seed, noise):
        marginals, _, _, _ = gradient_marginals(
            jax.random.key(seed), *inputs, noise, jnp.asarray(mechanism.noise_std, dtype), model=model,
            num_permutations=k, learning_rate=learning_rate, clip=1.0, mode=1, grid=mechanism.grid,
        )  # fmt: skip
        return marginals.block_until_ready()

    start = time.perf_counter()
    run(0, draw(0))
    first = time.perf_counter() - start
    start = time.perf_counter()
    noise = draw(1)
    drawing = time.perf_counter() - start
    start = time.perf_counter()
    marginals = run(2, noise)
    return drawing, time.perf_counter() - start, first, np.asarray(marginals)


def torch_run(X, y, X_test, y_test, k, noise_std, learning_rate, permutations):
    """Algorithm 1 (X*) as a per-step PyTorch loop: autograd per party, clip, noise, buffer, step, evaluate."""
    import torch

    torch.set_num_threads(1)  # tiny ops: one thread is fastest (and fair on a shared machine)
    X, y = torch.tensor(X, dtype=torch.float32), torch.tensor(y)
    X_test, y_test = torch.tensor(X_test, dtype=torch.float32), torch.tensor(y_test)
    n, f = X.shape
    buffer = torch.zeros(n, (f + 1) * 2)
    marginals = np.zeros((permutations, n))
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for t in range(1, permutations + 1):
        model = torch.nn.Linear(f, 2)
        torch.nn.init.normal_(model.weight, std=0.01)
        torch.nn.init.zeros_(model.bias)
        with torch.no_grad():
            before = -loss_fn(model(X_test), y_test).item()
        for j in torch.randperm(n).tolist():
            loss = loss_fn(model(X[j : j + 1]), y[j : j + 1])
            grads = torch.autograd.grad(loss, (model.weight, model.bias))
            gradient = torch.cat([grads[0].T.reshape(-1), grads[1]])
            gradient = gradient / max(1.0, gradient.norm().item())
            noisy = gradient + noise_std * torch.randn_like(gradient)
            buffer[j] += (noisy - buffer[j]) / t
            with torch.no_grad():
                model.weight -= learning_rate * buffer[j][: f * 2].reshape(f, 2).T
                model.bias -= learning_rate * buffer[j][f * 2 :]
                after = -loss_fn(model(X_test), y_test).item()
            marginals[t - 1, j] = after - before
            before = after
    return (time.perf_counter() - start) * k / permutations, marginals


def variance(args) -> None:
    """Spec Sec. 5 target 1 on sklearn's diabetes (least squares, V = -MSE) and on breast_cancer (logistic); with
    --sweep, the slopes over a grid of learning rates and epsilons, adding the paper's Fig. 2 setup (diabetes
    binarised at the median, 400 single-point parties, logistic regression, the other 42 rows as the test set)."""
    from sklearn.datasets import load_diabetes

    ks = (50, 100, 200, 400, 800)
    arms = (("iid", 0.0), ("correlated", 0.0), ("correlated", 0.5), ("correlated", 0.9))
    X, y = load_diabetes(return_X_y=True)
    regression = (y - y.mean()) / y.std()
    X_train, X_test = standardise(X[: args.parties], X[args.parties :])
    cancer = data(args.parties)
    # setup: (model, training rows, labels, test rows, labels, learning rates: default first, noise draws)
    setups = {
        "diabetes, least squares": (
            LinearModel(10), X_train, regression[: args.parties], X_test, regression[args.parties :],
            (0.01, 1e-4, 1e-3, 0.03), args.trials,
        ),
        "breast_cancer, logistic": (LogisticModel(30, 2), *cancer, (0.003, 0.03), args.trials),
    }  # fmt: skip
    if args.sweep:
        order = np.random.default_rng(0).permutation(len(y))
        fig2_train, fig2_test = standardise(X[order[:400]], X[order[400:]])
        labels = (y[order] > np.median(y)).astype(int)
        setups["diabetes > median, logistic, 400 parties (Fig. 2)"] = (
            LogisticModel(10, 2), fig2_train, labels[:400], fig2_test, labels[400:], (0.003, 0.03, 0.3), 4,
        )  # fmt: skip
    epsilons = (1.0, 10.0) if args.sweep else (args.epsilon,)
    print(f"n = {args.parties} parties (Fig. 2: 400), noise draws per k as given, delta 5e-5, k = {ks}")
    for name, (model, X_p, y_p, X_v, y_v, rates, trials) in setups.items():
        for lr, epsilon in itertools.product(rates if args.sweep else rates[:1], epsilons):
            results = dp_variance_by_k(
                model, X_p[:, None], y_p[:, None], X_v, y_v, ks, epsilon=epsilon, learning_rate=lr, arms=arms,
                trials=trials,
            )  # fmt: skip
            print(f"{name} (learning rate {lr:g}, epsilon {epsilon:g}, {trials} noise draws):")
            for (mode, q), r in results.items():
                label = {"iid": "i.i.d."}.get(mode, "X*" if q == 0 else f"Y*({q:g})")
                print(
                    f"  {label:8s} Var[psi] {' '.join(f'{v:.3g}' for v in r['variance'])}  slope "
                    f"{fitted_slope(ks, r['variance']):+.2f} | mean-adjusted variance "
                    f"{' '.join(f'{v:.3g}' for v in r['mean_adjusted_variance'])}  slope "
                    f"{fitted_slope(ks, r['mean_adjusted_variance']):+.2f}"
                )


def detection(args) -> None:
    """Table 2's protocol: 30 % flipped labels, logistic regression, (epsilon, 5e-5)-DP, k permutations."""
    X, y, X_test, y_test = data(args.parties, args.dataset)
    semivalues = ("shapley", "banzhaf", beta_shapley(4, 1), beta_shapley(16, 1))
    table = mislabel_detection(
        X, y, X_test, y_test, semivalues=semivalues, num_permutations=args.permutations, epsilon=args.epsilon,
        learning_rate=args.learning_rate, trials=args.trials, noise_seed=1000,
    )  # fmt: skip
    arms = ("no DP", "Y*(0.9)", "Y*(0.5)", "X*", "iid")
    print(
        f"{args.dataset}, {len(y)} points ({len(y_test)} test), k = {args.permutations}, {args.trials} trials, lr "
        f"{args.learning_rate}, ({args.epsilon:g}, 5e-5)-DP: AUROC mean (s.e.)"
    )
    print("| semivalue | " + " | ".join(arms) + " |")
    for name, row in table.items():
        cells = [f"{row[a].mean():.3f} ({row[a].std(ddof=1) / np.sqrt(len(row[a])):.2g})" for a in arms]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("Paired differences within a trial (same flips and permutations), mean (s.e.): the order is significant")
    print("where the mean exceeds about two standard errors.")
    print("| semivalue | " + " | ".join(f"{a} - {b}" for a, b in zip(arms, arms[1:])) + " |")
    for name, row in table.items():
        gaps = [row[a] - row[b] for a, b in zip(arms, arms[1:])]
        cells = [f"{g.mean():+.3f} ({g.std(ddof=1) / np.sqrt(len(g)):.2g})" for g in gaps]
        print(f"| {name} | " + " | ".join(cells) + " |")


def speed(args) -> None:
    X, y, X_test, y_test = data(args.parties)
    noise_std = Mechanism.gaussian(DPGuarantee(1.0, 5e-5), 1.0, num_compositions=args.permutations).noise_scale
    steps = args.permutations * args.parties
    print(f"{platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), {jax.devices()[0]}")
    print(f"k = {args.permutations} permutations x n = {args.parties} parties = {steps} steps, noise {noise_std:.2f}")
    for dtype in (jnp.float32, jnp.float64):
        drawing, seconds, first, marginals = jax_run(X, y, X_test, y_test, args.permutations, args.learning_rate, dtype)
        early = np.abs(marginals[: args.torch_permutations]).mean()
        print(
            f"bayesval JAX ({jnp.dtype(dtype).name}): exact noise draw {drawing:.2f} s + trajectories {seconds:.2f} s "
            f"({seconds / steps * 1e6:.1f} us/step; first call with compilation {first:.2f} s); mean |marginal| over "
            f"the first {args.torch_permutations} permutations {early:.3g}"
        )
        if dtype is jnp.float32:
            jax_seconds, jax_drawing = seconds, drawing
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: PyTorch side skipped (pip install torch to compare)")
        return
    torch_seconds, torch_marginals = torch_run(
        X, y, X_test, y_test, args.permutations, noise_std, args.learning_rate, args.torch_permutations
    )
    print(
        f"PyTorch per-step loop (float32, 1 thread, float noise): {torch_seconds:.1f} s for k = {args.permutations} "
        f"(timed on {args.torch_permutations} permutations, {torch_seconds / steps * 1e6:.1f} us/step); "
        f"mean |marginal| {np.abs(torch_marginals).mean():.3g} (a check that both compute the same thing: it varies by "
        "about 30 % between seeds, since the first releases carry the full noise)"
    )
    print(
        f"ratio PyTorch / bayesval (float32): {torch_seconds / jax_seconds:.1f}x trajectories alone, "
        f"{torch_seconds / (jax_seconds + jax_drawing):.1f}x with the exact noise draw"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=("speed", "variance", "detection"))
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--parties", type=int)
    parser.add_argument("--torch-permutations", type=int, default=20)
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--trials", type=int)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--sweep", action="store_true", help="variance: slopes over learning rates and epsilons")
    parser.add_argument("--dataset", default="breast_cancer", choices=("breast_cancer", "digits", *OPENML_DATASETS))
    args = parser.parse_args()
    defaults = {"speed": (400, 1), "variance": (10, 32), "detection": (200, 5)}[args.experiment]
    args.parties = args.parties or defaults[0]
    args.trials = args.trials or defaults[1]
    {"speed": speed, "variance": variance, "detection": detection}[args.experiment](args)


if __name__ == "__main__":
    main()
