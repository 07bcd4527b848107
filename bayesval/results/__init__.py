"""What a valuation returns: `ValuationResult`, the running sums of a sampled semivalue that let a run resume or
merge, their honest variances, the figures of a result, and the one serialisation protocol (records, their registry
and the result archive, `bayesval.results.serialisation`) (docs/architecture.md). A leaf: it imports nothing of
bayesval above `validation` and `statistics`."""

from bayesval.results.result import ValuationResult, ValueItem
from bayesval.results.serialisation import Record, register
from bayesval.results.state import Estimate, SemivalueState

__all__ = ["Estimate", "Record", "SemivalueState", "ValuationResult", "ValueItem", "register"]
