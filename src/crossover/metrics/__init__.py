"""Per-request and run metrics, matched-work verification and the verdict."""

from crossover.metrics.run import RunContext, summarize
from crossover.metrics.summary import RunSummary

__all__ = ["RunContext", "RunSummary", "summarize"]
