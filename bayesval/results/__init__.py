"""What a valuation returns: `ValuationResult`, the running sums of a sampled semivalue that let a run resume or
merge, their honest variances, and the figures of a result (docs/architecture.md)."""

from bayesval.results.result import ValuationResult, ValueItem
from bayesval.results.state import Estimate, SemivalueState

__all__ = ["Estimate", "SemivalueState", "ValuationResult", "ValueItem"]
