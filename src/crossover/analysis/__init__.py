"""Analysis of sweep results: crossovers with intervals, refinement, roofline.

Pure functions over :class:`crossover.analysis.schema.SweepFile`; numpy only.
"""

from __future__ import annotations

from crossover.analysis.crossovers import (
    METRICS,
    Finding,
    LevelDiff,
    MetricSpec,
    analyze_sweep,
    axis_unit,
    compare_pair,
    findings_to_schema,
    format_crossover,
    reanalyze,
)
from crossover.analysis.refine import propose_refinement, refine_until
from crossover.analysis.roofline import RooflineCheck, check_roofline, check_sweep
from crossover.analysis.schema import (
    Crossover,
    Inconclusive,
    RooflineFacts,
    SweepFile,
    SweepRun,
    TargetInfo,
    summary_value,
)

__all__ = [
    "METRICS",
    "Crossover",
    "Finding",
    "Inconclusive",
    "LevelDiff",
    "MetricSpec",
    "RooflineCheck",
    "RooflineFacts",
    "SweepFile",
    "SweepRun",
    "TargetInfo",
    "analyze_sweep",
    "axis_unit",
    "check_roofline",
    "check_sweep",
    "compare_pair",
    "findings_to_schema",
    "format_crossover",
    "propose_refinement",
    "reanalyze",
    "refine_until",
    "summary_value",
]
