"""round(s X) for X ~ N(0, 1), drawn exactly and many at a time: the integer noise of
`bayesval.privacy.Mechanism.gaussian_on_grid`.

Added to an integer c, the draw gives c + round(s X) = round(c + s X), a function of the Gaussian mechanism's output
on c: post-processing, so it keeps that mechanism's whole privacy profile, its PLD calibration and Poisson
subsampling included. A float Gaussian added to a float would not: the doubles it can reach depend on the input
(Mironov 2012; docs/privacy.md, "What the attack learns").

X is drawn by Karney's Algorithm N (C. F. F. Karney 2016, "Sampling exactly from the normal distribution", ACM
Trans. Math. Softw. 42(1), Sec. 2): an integer k >= 0 with probability proportional to exp(-k^2 / 2) (a geometric
count of Bernoulli(exp(-1/2)) successes kept with probability exp(-k (k - 1) / 2)), a uniform fraction x kept with
probability exp(-x (2k + x) / 2) (k + 1 runs of his Algorithm B), and a fair sign: sign (k + x) has the standard
normal density. Every test compares uniform deviates digit by digit and draws a digit only when a comparison needs
it, and round(s (k + x)), for a whole number s, reads only as many digits of x as it needs. No step rounds.

Vectorised: a batch's samples advance together in NumPy, each comparison on the deviates' first digit (32 random
bits). The comparisons the first digits leave open (equal digits, probability 2^-32 each) are finished one sample
at a time in Python integers, and so is the rounding where x's first 32 bits leave it open (probability about
s / 2^32). `digit_bits` narrows the digits so that tests run those paths often. Batches of BATCH samples run on a
thread per core, each from its own stream of the source (`RandomWords.stream`), so that a seeded draw does not
depend on the number of cores.
"""

from __future__ import annotations

import math
import os
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np

WORD_BITS = 64
WIDTHS = (1, 2, 4, 8, 16, 32, 64)  # digit widths a word divides into
DIGIT_BITS = 32  # one uniform digit: two per word; first digits tie with probability 2^-32
CHOICE_BITS = 8  # the small uniform integers of Algorithm B (below 2k + 2) come from bytes
ROUNDING_BITS = 32  # bits of x the vectorised rounding reads: s * 2^32 must stay below 2^63
MAX_SCALE = 2**31  # s in grid steps below which the vectorised rounding holds in 64-bit integers
BATCH = 2**20  # samples advanced together (memory: a few arrays of this many 64-bit words)


class RandomWords:
    """Uniform random 64-bit words: from the operating system's cryptographic source (`os.urandom`), or, for a
    seeded experiment, from a `random.Random` seeded with `seed` (bytes: the release's claimed key)."""

    def __init__(self, seed: bytes | None = None) -> None:
        self._seed = seed
        self._rng = None if seed is None else random.Random(seed)

    def stream(self, index: int) -> RandomWords:
        """An independent source for the `index`-th batch of a draw: a seeded source's seed with the index appended
        (index 0: the seed itself, from its start), or the operating system's."""
        if self._seed is None:
            return RandomWords()
        return RandomWords(self._seed if index == 0 else self._seed + b"/batch %d" % index)

    def draw(self, count: int, width: int = WORD_BITS) -> np.ndarray:
        """`count` uniform integers of `width` bits (a divisor of 64), cut from whole words: unsigned integers of that
        width where it is whole bytes (a view of the bytes drawn, not a copy), else uint64."""
        if width not in WIDTHS:
            raise ValueError(f"width must divide {WORD_BITS}, got {width!r}")
        per_word = WORD_BITS // width
        size = 8 * -(-int(count) // per_word)
        raw = os.urandom(size) if self._rng is None else self._rng.randbytes(size)
        if width >= 8:  # whole bytes: read them as little-endian integers of that width
            return np.frombuffer(raw, dtype=f"<u{width // 8}")[:count]
        words = np.frombuffer(raw, dtype="<u8")
        shifts = np.arange(per_word, dtype=np.uint64) * np.uint64(width)
        return ((words[:, None] >> shifts) & np.uint64((1 << width) - 1)).ravel()[:count]


def rounded_gaussian_pmf(values, scale: float) -> list[float]:
    """P[round(s X) = m] = Phi((m + 1/2) / s) - Phi((m - 1/2) / s) for X ~ N(0, 1), each integer m of `values`
    (from the upper tail, where the difference keeps its digits)."""
    root = float(scale) * math.sqrt(2.0)
    return [
        0.5 * (math.erfc((abs(m) - 0.5) / root) - math.erfc((abs(m) + 0.5) / root))
        if m
        else 1.0 - math.erfc(0.5 / root)
        for m in values
    ]


def rounded_gaussian_variance(scale: float) -> float:
    """Var round(s X) for X ~ N(0, 1): s^2 + 1/12 to double precision from s = 2 on (the Poisson-summation
    correction is below 8 exp(-2 pi^2 s^2) s^2); summed over the integers below that."""
    scale = float(scale)
    if not scale > 0:
        raise ValueError(f"the scale must be > 0, got {scale!r}")
    if scale >= 2:
        return scale * scale + 1 / 12
    reach = range(1, math.ceil(40 * scale) + 2)
    return 2 * sum(m * m * p for m, p in zip(reach, rounded_gaussian_pmf(reach, scale)))


def _cores() -> int:
    """The cores this process may run on (its affinity where the system reports one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _bit_lengths(values: np.ndarray) -> np.ndarray:
    """The bit length of each uint64 entry: the binary exponent of its high or low 32-bit half, each exact as a
    double (`np.frexp(v)` gives v = m 2^e with 1/2 <= m < 1, so e is v's bit length, and 0 for 0)."""
    values = values.astype(np.uint64)
    high = np.frexp((values >> np.uint64(32)).astype(np.float64))[1]
    low = np.frexp((values & np.uint64(0xFFFFFFFF)).astype(np.float64))[1]
    return np.where(high > 0, high + 32, low).astype(np.uint64)


class RoundedGaussianSampler:
    """round(s X), X ~ N(0, 1), for a whole number s of grid steps, drawn exactly (module docstring).

    words: the source of uniform bits. digit_bits: the width of one digit of a uniform deviate (32; tests narrow it
    to make the digit-by-digit paths common)."""

    def __init__(self, words: RandomWords, digit_bits: int = DIGIT_BITS) -> None:
        if digit_bits not in WIDTHS:
            raise ValueError(f"digit_bits must be one of {WIDTHS}, got {digit_bits!r}")
        self._words = words
        self._bits = digit_bits
        self._streams = 0  # batches drawn so far: each takes the next stream of `words`

    def sample(self, scale: int, count: int) -> np.ndarray:
        """`count` independent draws of round(scale X) as int64: batches of BATCH samples, each from its own stream
        of the source (so a seeded draw does not depend on how many threads ran it), on one thread per core."""
        if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or not 1 <= scale < MAX_SCALE:
            raise ValueError(f"scale must be a whole number of grid steps in [1, 2^31), got {scale!r}")
        starts = range(0, int(count), BATCH)
        streams = [self._words.stream(self._streams + index) for index in range(len(starts))]
        self._streams += len(starts)

        def batch(start: int, words: RandomWords) -> np.ndarray:
            return RoundedGaussianSampler(words, self._bits)._batch(int(scale), min(BATCH, int(count) - start))

        workers = min(len(starts), _cores())
        if workers <= 1:
            parts = [batch(start, words) for start, words in zip(starts, streams)]
        else:  # NumPy and os.urandom release the GIL on whole batches
            with ThreadPoolExecutor(workers) as pool:
                parts = list(pool.map(batch, starts, streams))
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    # Uniform digits and deviates -----------------------------------------------------------------------------------

    def _digits(self, count: int) -> np.ndarray:
        return self._words.draw(count, self._bits)

    def _digit(self) -> int:
        return int(self._digits(1)[0])

    def _below(self, bound: np.ndarray) -> np.ndarray:
        """A uniform integer below each entry of `bound` (>= 1), by rejection on its bit length."""
        bound = bound.astype(np.uint64)
        width = CHOICE_BITS if bound.max(initial=1) <= 1 << CHOICE_BITS else WORD_BITS
        lengths = _bit_lengths(bound - np.uint64(1))
        shifts = (np.uint64(width) - lengths) % np.uint64(WORD_BITS)
        out = np.zeros(bound.size, np.uint64)
        todo = np.flatnonzero(lengths > 0)  # a bound of 1 leaves only 0
        while todo.size:
            draw = self._words.draw(todo.size, width) >> shifts[todo]
            good = draw < bound[todo]
            out[todo[good]] = draw[good]
            todo = todo[~good]
        return out

    def _fresh_below(self, old: np.ndarray, old_tails: dict, ids: np.ndarray):
        """Whether a fresh deviate lies below each old one (first digits `old`, later digits `old_tails` by sample
        id, extended in place where a comparison reads them): (below, the fresh deviates' first digits, their
        later digits by sample id)."""
        fresh = self._digits(old.size)
        below = fresh < old
        tails: dict[int, list[int]] = {}
        for i in np.flatnonzero(fresh == old).tolist():  # equal first digits: compare digit by digit
            sample = int(ids[i])
            old_tail, fresh_tail = old_tails.setdefault(sample, []), tails.setdefault(sample, [])
            for position in range(1 << 62):
                if position == len(old_tail):
                    old_tail.append(self._digit())
                fresh_tail.append(self._digit())
                if fresh_tail[position] != old_tail[position]:
                    below[i] = fresh_tail[position] < old_tail[position]
                    break
        return below, fresh, tails

    # Karney 2016, Algorithm N ---------------------------------------------------------------------------------------

    def _exp_minus_half(self, ids: np.ndarray) -> np.ndarray:
        """Bernoulli(exp(-1/2)) per sample (Karney's Algorithm H, von Neumann's method): the length n of the run
        1/2 > U_1 > U_2 > ... > U_n of uniform deviates is even with probability exp(-1/2)."""
        first = self._digits(ids.size)
        result = (first >> (self._bits - 1)) == 1  # U_1 >= 1/2 (its first bit): n = 0
        where = np.flatnonzero(~result)
        heads, tails, length = first[where], {}, 1
        while where.size:
            below, heads, tails = self._fresh_below(heads, tails, ids[where])
            result[where[~below]] = length % 2 == 0
            where, heads, length = where[below], heads[below], length + 1
        return result

    def _exp_minus_half_times(self, ids: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Bernoulli(exp(-times / 2)) per sample: `times` Bernoulli(exp(-1/2)) successes in a row."""
        passed = np.ones(ids.size, bool)
        where, trial = np.flatnonzero(times > 0), 0
        while where.size:
            success = self._exp_minus_half(ids[where])
            passed[where[~success]] = False
            trial += 1
            where = where[success & (times[where] > trial)]
        return passed

    def _half_gaussian_integer(self, ids: np.ndarray) -> np.ndarray:
        """k >= 0 with probability exp(-k/2) (1 - exp(-1/2)): Bernoulli(exp(-1/2)) successes before a failure."""
        k = np.zeros(ids.size, np.int64)
        where = np.arange(ids.size)
        while where.size:
            success = self._exp_minus_half(ids[where])
            k[where[success]] += 1
            where = where[success]
        return k

    def _fraction_kept(self, ids, k, x, x_tails) -> np.ndarray:
        """Bernoulli(exp(-x (2k + x) / (2k + 2))) per sample (Karney's Algorithm B): the number n of steps of the
        chain x > U_1 > U_2 > ... taken, each also passing with probability (2k + x) / (2k + 2) (2k of 2k + 2 cases
        pass, one passes if a fresh deviate lies below x, one fails), is even with that probability."""
        result = np.zeros(ids.size, bool)
        where, previous, previous_tails, steps = np.arange(ids.size), x, x_tails, 0
        while where.size:
            below, fresh, fresh_tails = self._fresh_below(previous, previous_tails, ids[where])
            twice_k = 2 * k[where].astype(np.uint64)
            case = self._below(twice_k + np.uint64(2))
            passes = below & (case < twice_k)
            test = np.flatnonzero(below & (case == twice_k))
            if test.size:
                passes[test] = self._fresh_below(x[where[test]], x_tails, ids[where[test]])[0]
            result[where[~passes]] = steps % 2 == 0
            # x's later digits stay in x_tails, shared by every comparison with x
            where, previous, previous_tails, steps = where[passes], fresh[passes], fresh_tails, steps + 1
        return result

    def _batch(self, scale: int, count: int) -> np.ndarray:
        out = np.empty(count, np.int64)
        todo = np.arange(count)
        while todo.size:
            k = self._half_gaussian_integer(todo)
            kept = self._exp_minus_half_times(todo, k * (k - 1))
            todo_k, k = todo[kept], k[kept]
            rejected = [todo[~kept]]
            x, x_tails = self._digits(todo_k.size), {}
            alive = np.ones(todo_k.size, bool)
            for run in range(int(k.max(initial=-1)) + 1):  # k + 1 runs of Algorithm B for each sample
                where = np.flatnonzero(alive & (k >= run))
                alive[where] = self._fraction_kept(todo_k[where], k[where], x[where], x_tails)
            rejected.append(todo_k[~alive])
            done = np.flatnonzero(alive)
            ids = todo_k[done]
            magnitude = self._rounded(scale, k[done], x[done], x_tails, ids)
            negative = self._below(np.full(ids.size, 2, np.uint64)) == 1
            out[ids] = np.where(negative, -magnitude, magnitude)
            todo = np.sort(np.concatenate(rejected))
        return out

    def _rounded(self, scale: int, k: np.ndarray, x: np.ndarray, x_tails: dict, ids: np.ndarray) -> np.ndarray:
        """floor(scale (k + x) + 1/2): from x's first 32 bits where they decide it, else digit by digit."""
        bits = min(self._bits, ROUNDING_BITS)
        prefix = x >> np.uint64(self._bits - bits)
        low = np.uint64(scale) * prefix + np.uint64(1 << (bits - 1))  # 2^bits (scale x_low + 1/2)
        high = low + np.uint64(scale)  # 2^bits (scale x_high + 1/2), x below x_high
        whole = (low >> np.uint64(bits)).astype(np.int64)
        open_ = np.flatnonzero((low >> np.uint64(bits)) != ((high - np.uint64(1)) >> np.uint64(bits)))
        for i in open_.tolist():
            tail = x_tails.setdefault(int(ids[i]), [])
            digits, position = int(x[i]), 0
            while True:
                width = self._bits * (position + 1)
                low_i = scale * digits + (1 << (width - 1))
                if low_i >> width == (low_i + scale - 1) >> width:
                    whole[i] = low_i >> width
                    break
                if position == len(tail):
                    tail.append(self._digit())
                digits = (digits << self._bits) | tail[position]
                position += 1
        return scale * k + whole


__all__ = ["RandomWords", "RoundedGaussianSampler", "rounded_gaussian_pmf", "rounded_gaussian_variance"]
