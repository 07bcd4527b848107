"""The batched noise-aware Gibbs sampler (Sim et al. 2023, Algorithm 1, with collapsed and interweaving moves) in
four layers, as BlackJAX splits its samplers: `state` (the NamedTuples the kernel passes around), `kernel` (pure
`init` and `step`), `moves` and `adaptation` (the Metropolis moves and the warm-up fit they propose from) and
`driver` (the host loop over segments, returning `CoalitionDraws` as the NUTS driver does)."""

from bayesval.inference.gibbs.adaptation import (
    ADAPT_FROM_SEGMENT,
    MIN_PROPOSAL_DRAWS,
    PROPOSAL_INFLATION,
    WINDOW_ENDS,
    ConditionalFit,
    Proposal,
    RunningMoments,
    fit_proposals,
    joint_coordinates,
    omega_coordinates,
    theta_coordinates,
)
from bayesval.inference.gibbs.driver import GibbsRun, plan_coalition_posteriors, sample_coalition_posteriors
from bayesval.inference.gibbs.driver import _advance as _advance  # the compiled program, for its cache size
from bayesval.inference.gibbs.kernel import init, initial_state, step
from bayesval.inference.gibbs.state import BLRPriors, GibbsInputs, GibbsSettings, GibbsState

__all__ = [
    "ADAPT_FROM_SEGMENT",
    "BLRPriors",
    "ConditionalFit",
    "GibbsInputs",
    "GibbsRun",
    "GibbsSettings",
    "GibbsState",
    "MIN_PROPOSAL_DRAWS",
    "PROPOSAL_INFLATION",
    "Proposal",
    "RunningMoments",
    "WINDOW_ENDS",
    "fit_proposals",
    "init",
    "initial_state",
    "joint_coordinates",
    "omega_coordinates",
    "plan_coalition_posteriors",
    "sample_coalition_posteriors",
    "step",
    "theta_coordinates",
]
