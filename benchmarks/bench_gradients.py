"""Gradient-trajectory semivalues (issue 16): bayesval's scanned JAX program against a straightforward PyTorch
per-step loop of the same computation (the way the paper's Opacus code runs), in one run, printing the ratio.

    python benchmarks/bench_gradients.py                       # k = 1000 permutations x 400 parties, X* noise
    python benchmarks/bench_gradients.py --permutations 100    # quick look

Both sides: breast_cancer standardised, 400 single-point parties, the remaining 169 rows as the test set,
multinomial logistic regression, per-party clipped gradient + Gaussian noise at (1, 5e-5)-DP over k releases,
X* running-mean release, V = negated test cross-entropy after every step. The PyTorch loop is timed on the first
`--torch-permutations` permutations and scaled to k (its cost per permutation is constant). torch is optional:
without it only the JAX side is printed.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_breast_cancer

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.estimators import LogisticModel, gradient_marginals, standardise
from bayesval.privacy import DPGuarantee, Mechanism


def data(num_parties: int):
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X_train, X_test = standardise(X[order[:num_parties]], X[order[num_parties:]])
    return X_train, y[order[:num_parties]], X_test, y[order[num_parties:]]


def jax_run(X, y, X_test, y_test, k, noise_std, learning_rate, dtype):
    model = LogisticModel(X.shape[1], 2)
    inputs = (
        jnp.asarray(X[:, None, :], dtype),
        jnp.asarray(y[:, None]),
        jnp.asarray(X_test, dtype),
        jnp.asarray(y_test),
        jnp.asarray(noise_std, dtype),
    )

    def run(seed):
        keys = jax.random.key(seed), jax.random.key(seed + 1)
        marginals, _, _ = gradient_marginals(
            *keys, *inputs, model=model, num_permutations=k, learning_rate=learning_rate, clip=1.0, mode=1
        )
        return marginals.block_until_ready()

    start = time.perf_counter()
    run(0)
    first = time.perf_counter() - start
    start = time.perf_counter()
    marginals = run(2)
    return time.perf_counter() - start, first, np.asarray(marginals)


def torch_run(X, y, X_test, y_test, k, noise_std, learning_rate, permutations):
    """Algorithm 1 (X*) as a per-step PyTorch loop: autograd per party, clip, noise, buffer, step, evaluate."""
    import torch

    torch.set_num_threads(2)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--parties", type=int, default=400)
    parser.add_argument("--torch-permutations", type=int, default=20)
    parser.add_argument("--learning-rate", type=float, default=0.003)
    args = parser.parse_args()
    X, y, X_test, y_test = data(args.parties)
    noise_std = Mechanism.gaussian(DPGuarantee(1.0, 5e-5), 1.0, num_compositions=args.permutations).noise_scale
    steps = args.permutations * args.parties
    print(f"{platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), {jax.devices()[0]}")
    print(f"k = {args.permutations} permutations x n = {args.parties} parties = {steps} steps, noise {noise_std:.2f}")
    for dtype in (jnp.float32, jnp.float64):
        seconds, first, marginals = jax_run(
            X, y, X_test, y_test, args.permutations, noise_std, args.learning_rate, dtype
        )
        print(
            f"bayesval JAX ({jnp.dtype(dtype).name}): {seconds:.2f} s ({seconds / steps * 1e6:.1f} us/step; first call "
            f"with compilation {first:.2f} s); mean |marginal| {np.abs(marginals).mean():.3g}"
        )
        if dtype is jnp.float32:
            jax_seconds = seconds
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: PyTorch side skipped (pip install torch to compare)")
        return
    torch_seconds, torch_marginals = torch_run(
        X, y, X_test, y_test, args.permutations, noise_std, args.learning_rate, args.torch_permutations
    )
    print(
        f"PyTorch per-step loop (float32, 2 threads): {torch_seconds:.1f} s for k = {args.permutations} "
        f"(timed on {args.torch_permutations} permutations, {torch_seconds / steps * 1e6:.1f} us/step); "
        f"mean |marginal| {np.abs(torch_marginals).mean():.3g}"
    )
    print(f"ratio PyTorch / bayesval (float32): {torch_seconds / jax_seconds:.1f}x")


if __name__ == "__main__":
    main()
