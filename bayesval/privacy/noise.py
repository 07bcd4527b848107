"""Where privacy noise comes from: OS entropy, or an explicit seed for reproducible experiments (docs/architecture.md,
"The privacy boundary").

Privacy noise never comes from a sampling key: a sampling key is public (it is in the result, the
paper, the notebook), and noise drawn from it can be subtracted. A `NoiseSource` hands out one key
per release. Without a seed each key is 64 bits of OS entropy. With a seed the keys are a
reproducible stream (key(seed) itself for the first release, as in earlier versions, then
fold_in(key(seed), j) for release j), which weakens privacy to the secrecy of the seed; it exists
for experiments such as Sim et al.'s fixed-seed epsilon sweep.

A seed must not make two different releases: the same standard-normal draw at two noise scales
recovers the exact statistic (o_1 - (sigma_1/sigma_2) o_2 = (1 - sigma_1/sigma_2) s), and two
owners sharing a draw cancel each other's noise. So every seeded key is claimed, process-wide, by
the fingerprint of the release it perturbs (owner, what, mechanism, exact inputs). Claiming a key
again for the identical release is allowed, since it reproduces the same output and reveals nothing
new (re-running a notebook); claiming it for anything else is refused unless the source was made
with `allow_reuse=True`. The registry is process-wide on purpose: reuse across objects is the bug.
"""

from __future__ import annotations

import hashlib
import os

import jax
import numpy as np

from bayesval.validation import check_bool, check_int

_CLAIMED: dict[tuple[int, int], bytes] = {}


class SeedReuseError(ValueError):
    """A noise seed was asked to perturb a second, different release."""


class NoiseSource:
    """A stream of privacy-noise keys: OS entropy (seed=None, the default) or a seeded, reproducible stream.

    seed: a non-negative int, for reproducible experiments only (anyone who knows it can remove the noise).
    allow_reuse: let this seed perturb releases that another seeded source already perturbed with the
        same keys (nested noise across privacy levels, for experiments); off by default.
    """

    def __init__(self, seed: int | None = None, *, allow_reuse: bool = False) -> None:
        self.seed = None if seed is None else check_int("noise_seed", seed, minimum=0)
        if self.seed is not None and self.seed >= 2**63:
            raise ValueError(f"noise_seed must be < 2**63, got {seed!r}")
        self.allow_reuse = check_bool("allow_seed_reuse", allow_reuse)
        self._issued = 0

    @property
    def is_seeded(self) -> bool:
        return self.seed is not None

    def key(self, fingerprint: bytes) -> jax.Array:
        """The key for the next release, whose identity is `fingerprint` (see `fingerprint`)."""
        if self.seed is None:
            return jax.random.wrap_key_data(np.frombuffer(os.urandom(8), dtype=np.uint32))
        index, self._issued = self._issued, self._issued + 1
        claimed = _CLAIMED.setdefault((self.seed, index), fingerprint)
        if claimed != fingerprint and not self.allow_reuse:
            raise SeedReuseError(
                f"noise_seed={self.seed} already perturbed a different release with the same noise (release "
                f"{index} of that seed): reusing it across releases, privacy levels or parties lets the noise be "
                "subtracted. Use another seed, no seed (OS entropy), or allow_seed_reuse=True for an experiment"
            )
        root = jax.random.key(self.seed)
        return root if index == 0 else jax.random.fold_in(root, index)

    def __repr__(self) -> str:
        if self.seed is None:
            return "NoiseSource(OS entropy)"
        return f"NoiseSource(seed={self.seed}, allow_reuse={self.allow_reuse})"


def fingerprint(*parts) -> bytes:
    """A digest of a release's identity: strings, numbers and arrays (by dtype, shape and bytes)."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, (str, int, float, bool)) or part is None:
            digest.update(repr(part).encode())
        else:
            array = np.ascontiguousarray(np.asarray(part))
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
        digest.update(b"|")
    return digest.digest()


__all__ = ["NoiseSource", "SeedReuseError", "fingerprint"]
