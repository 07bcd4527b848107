"""Sampler budgets: fast defaults for interactive use and the papers' settings."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SamplerConfig:
    """How much MCMC one coalition posterior gets, and how many independent repeats value it.

    num_samples sweeps follow num_warmup burn-in sweeps; every thinning-th is kept (NumPyro's
    convention), so one repeat yields num_chains * num_samples / thinning draws. Each repeat runs
    fresh chains and a fresh prior sample and gives one KL estimate; their spread is the stderr.
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 4800
    thinning: int = 3
    num_repeats: int = 3
    progress_bar: bool = True

    def __post_init__(self) -> None:
        for name in ("num_chains", "num_samples", "thinning", "num_repeats"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SamplerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_warmup < 0:
            raise ValueError(f"SamplerConfig.num_warmup must be >= 0, got {self.num_warmup}")
        if self.num_samples % self.thinning:
            raise ValueError(
                f"SamplerConfig.num_samples={self.num_samples} must be a multiple of thinning={self.thinning}"
            )

    @property
    def draws_per_repeat(self) -> int:
        return self.num_chains * self.num_samples // self.thinning

    def with_(self, **changes) -> SamplerConfig:
        return replace(self, **changes)

    @classmethod
    def preset(cls, name: str) -> SamplerConfig:
        """'fast' (the default) or 'paper' (Sim et al. 2023, App. H.1: 16 chains, 10,000 burn-in,
        30,000 sweeps thinned by 16, i.e. 30,000 draws per posterior; 5 repeats as in Fig. 2)."""
        presets = {
            "fast": cls(),
            "paper": cls(num_chains=16, num_warmup=10_000, num_samples=30_000, thinning=16, num_repeats=5),
        }
        if name not in presets:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(presets)}")
        return presets[name]
