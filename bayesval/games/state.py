"""The running sums of a sampled semivalue: what a result carries so that a run can resume and two runs can merge.

A sampler files each draw of index i into one of G groups g (the whole sample for permutations; coalitions with and
without i for maximum sample reuse; coalition sizes for stratified sampling) with phi_i = sum_g c_g E[x_gi]. The
estimate is sum_g c_g mean_gi and its variance sum_g c_g^2 s_gi^2 / m_gi (independent groups; s^2 the sample variance
of the m_gi draws). Sums are float64 on the host, added batch after batch in a fixed order, so a resumed run repeats an
uninterrupted one to the last bit.

A utility that returns R estimates per coalition (R, B) is averaged over r before the draws are filed; the sums per
estimate are kept too, and the spread over r of the semivalues from each estimate alone adds var_r / R to the
variance: the utility's own error, which sampling more coalitions does not shrink when the utility reuses its
estimates (`permutation_shapley` has always done this).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class SemivalueState:
    """What resuming a sampled semivalue needs, and what identifies its game.

    semivalue, sampler    names of the semivalue and the sampler (with its options), e.g. 'shapley', 'permutation'
    coefficients          (G,) c_g of each group
    sums                  (R, G, n) sums of the draws from each of the utility's R estimates
    sums_sq               (G, n) sums of squares of the draws averaged over the R estimates
    counts                (G, n) draws per group and index
    evaluations           utility evaluations (coalitions valued) so far
    streams               per key (hex of its key data): [batch size, batches done]. The key and the batch size fix
                          every batch's coalitions: a run resumed with one of these keys (and its batch size) starts
                          at the next batch, one with a new key at batch 0
    rankings              (H, n) the last rankings (index order, best first), for rank-stability rules
    """

    semivalue: str
    sampler: str
    coefficients: np.ndarray
    sums: np.ndarray
    sums_sq: np.ndarray
    counts: np.ndarray
    evaluations: int = 0
    streams: dict[str, list[int]] = field(default_factory=dict)
    rankings: np.ndarray | None = None

    ARRAYS = ("coefficients", "sums", "sums_sq", "counts", "rankings")

    @classmethod
    def empty(cls, semivalue: str, sampler: str, coefficients, num_repeats: int, num_players: int):
        groups = len(coefficients)
        return cls(
            semivalue,
            sampler,
            np.asarray(coefficients, np.float64),
            np.zeros((num_repeats, groups, num_players)),
            np.zeros((groups, num_players)),
            np.zeros((groups, num_players), np.int64),
            rankings=np.zeros((0, num_players), np.int64),
        )

    @property
    def num_players(self) -> int:
        return self.counts.shape[1]

    @property
    def num_repeats(self) -> int:
        return self.sums.shape[0]

    @property
    def index_counts(self) -> np.ndarray:
        """Draws per index (n,) over the groups the semivalue weighs."""
        return self.counts[self.coefficients != 0].sum(axis=0)

    def add(self, sums, sums_sq, counts, evaluations: int) -> None:
        """File one batch's sums (R, G, n), sums of squares (G, n) and counts (G, n)."""
        self.sums += np.asarray(sums, np.float64)
        self.sums_sq += np.asarray(sums_sq, np.float64)
        self.counts += np.asarray(counts, np.int64)
        self.evaluations += int(evaluations)

    def estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """Values (n,) and their variances (n,); inf variance where a weighted group has fewer than 2 draws."""
        used = self.coefficients != 0
        counts = self.counts[used].astype(np.float64)
        coefficients = self.coefficients[used][:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            per_repeat = (coefficients * self.sums[:, used] / counts).sum(axis=1)  # (R, n)
            means = self.sums[:, used].mean(axis=0) / counts
            sample_var = np.maximum(self.sums_sq[used] - counts * means**2, 0.0) / (counts - 1)
            variance = (coefficients**2 * np.where(counts > 1, sample_var / counts, np.inf)).sum(axis=0)
        values = per_repeat.mean(axis=0)
        if self.num_repeats > 1:
            variance = variance + per_repeat.var(axis=0, ddof=1) / self.num_repeats
        return values, variance

    def same_game(self, other: SemivalueState) -> str | None:
        """None if `other` sampled the same game the same way, else what differs (for an error)."""
        mine = (self.num_players, self.semivalue, self.sampler, self.num_repeats)
        theirs = (other.num_players, other.semivalue, other.sampler, other.num_repeats)
        labels = ("num_players", "semivalue", "sampler", "estimates per coalition (R)")
        for label, a, b in zip(labels, mine, theirs):
            if a != b:
                return f"{label} {a!r} != {b!r}"
        return None

    def merged(self, other: SemivalueState) -> SemivalueState:
        """The state of both runs' draws together (the same game, no key stream in both)."""
        difference = self.same_game(other)
        if difference is not None:
            raise ValueError(f"cannot merge the results of different games: {difference}")
        if set(self.streams) & set(other.streams):
            raise ValueError(
                "cannot merge two results sampled from the same key: their first batches are the same draws, which "
                "would count twice; run the second with another key, or resume the first (resume_from=...)"
            )
        return replace(
            self,
            sums=self.sums + other.sums,
            sums_sq=self.sums_sq + other.sums_sq,
            counts=self.counts + other.counts,
            evaluations=self.evaluations + other.evaluations,
            streams=self.streams | other.streams,
            rankings=np.zeros((0, self.num_players), np.int64),
        )

    def copy(self) -> SemivalueState:
        arrays = {name: np.array(getattr(self, name)) for name in self.ARRAYS}
        return replace(self, streams={k: list(v) for k, v in self.streams.items()}, **arrays)

    def to_json(self) -> dict:
        """The scalars, for a result's JSON metadata (the arrays go in the .npz beside it)."""
        return {
            "semivalue": self.semivalue,
            "sampler": self.sampler,
            "evaluations": self.evaluations,
            "streams": self.streams,
        }

    @classmethod
    def from_json(cls, meta: dict, arrays: dict[str, np.ndarray]) -> SemivalueState:
        return cls(**meta, **arrays)
