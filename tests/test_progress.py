"""Progress-bar descriptions (bayesval.progress): the caller's stage, which call of it, then the sampler."""

import numpy as np

from bayesval.progress import describe, stage


def test_a_stage_names_each_of_its_sampler_calls_and_ends_with_it():
    assert describe("Gibbs") == "Gibbs"
    with stage("valuation: posteriors of 7 coalitions", calls=2):
        first, second = describe("Gibbs"), describe("Gibbs")
    assert first == "valuation: posteriors of 7 coalitions, call 1 of 2 [Gibbs]"
    assert second == "valuation: posteriors of 7 coalitions, call 2 of 2 [Gibbs]"
    with stage("rewards", calls=1):
        assert describe("NUTS") == "rewards [NUTS]"
    with stage("search"):  # the number of calls unknown: counted from the second on
        assert [describe("Gibbs") for _ in range(2)] == ["search [Gibbs]", "search, call 2 [Gibbs]"]
    assert describe("Gibbs") == "Gibbs"


def test_an_inner_stage_replaces_the_outer_one_while_it_lasts():
    with stage("outer", calls=3):
        assert describe("Gibbs") == "outer, call 1 of 3 [Gibbs]"
        with stage("inner"):
            assert describe("Gibbs") == "inner [Gibbs]"
        assert describe("Gibbs") == "outer, call 2 of 3 [Gibbs]"


def _nuts_draws_with_a_recording_bar(monkeypatch, progress_bar: bool):
    """Draws of a one-party Gaussian model by batched NUTS and, at each update of the progress bar, the draws it
    reports done and whether the sampling program's outputs so far are computed (`jax.Array.is_ready`)."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from bayesval.inference import nuts
    from bayesval.inference.data import NoiseAwareData

    outputs, at_updates = [], []

    def model(data, mask):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([4]).to_event(1))
        with numpyro.plate("parties", 1), numpyro.handlers.mask(mask=mask):
            numpyro.sample("perturbed", dist.Normal(theta.sum(), 1.0), obs=data.perturbed[:, 0])

    class Recording:
        """The sampling program, keeping what each call returns."""

        def __init__(self, program):
            self.start, self.constrain, self.fit = program.start, program.constrain, program.fit

            def run(*arguments):
                outputs.append(program.run(*arguments))
                return outputs[-1]

            run.lower = program.run.lower  # compiled ahead of the first call (bayesval.compilation)
            self.run = run

    class RecordingBar:
        def __init__(self, total, desc, disable):
            self.done = 0

        def update(self, draws):
            self.done += draws
            at_updates.append(
                (
                    self.done,
                    all(
                        jax.random.key_data(leaf).is_ready()
                        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)
                        else leaf.is_ready()
                        for leaf in jax.tree.leaves(outputs)
                    ),
                )
            )

        def close(self):
            pass

    program = nuts._program
    monkeypatch.setattr(nuts, "_program", lambda *arguments: Recording(program(*arguments)))
    monkeypatch.setattr(nuts, "tqdm", RecordingBar)
    sample = nuts.sample_coalition_posteriors_nuts(
        jax.random.key(0),
        model,
        NoiseAwareData(jnp.ones((1, 1)), jnp.ones(1), jnp.ones(1)),
        np.ones((64, 1), bool),
        ("theta",),
        num_chains=4,
        num_warmup=400,
        num_samples=600,
        max_tree_depth=6,
        segments=4,
        progress_bar=progress_bar,
    )
    return sample.draws, at_updates


def test_the_nuts_bar_advances_as_the_sweeps_are_done_not_all_at_the_end(monkeypatch):
    """The bar advances once a phase's sweeps are computed, not when the phase is dispatched (JAX returns from a
    call before its work is done, so a bar updated on dispatch reaches its total at once and then waits), and the
    draws are those of a run without the bar."""
    draws, at_updates = _nuts_draws_with_a_recording_bar(monkeypatch, progress_bar=True)
    assert at_updates == [(done, True) for done in (100, 200, 300, 400, 550, 700, 850, 1000)]
    quiet, _ = _nuts_draws_with_a_recording_bar(monkeypatch, progress_bar=False)
    np.testing.assert_array_equal(draws, quiet)
