"""Hardware and model facts, rules as cited data, a cost model, and ranked advice.

Public API::

    from crossover.advise import AdviceRequest, advise, load_model, system_from_flags
    advice = advise(AdviceRequest(system=system_from_flags("H200", 4), model=load_model(m)))

``advice`` is the ``crossover.advice/1`` JSON object described in docs/interfaces.md.
"""

from __future__ import annotations

from crossover.advise.advisor import SCHEMA, AdviceRequest, advise, regimes_for
from crossover.advise.cost import AllReduceCurve, AlphaBeta, Layout, TableCurve, load_curve
from crossover.advise.efficiency import Calibration, EngineProfile, load_calibration
from crossover.advise.hardware import (
    GpuSpec,
    System,
    find_gpu,
    known_gpus,
    system_from_flags,
    system_from_nvml,
)
from crossover.advise.model import ModelFacts, known_models, load_model
from crossover.advise.results import SweepResults, load_results
from crossover.advise.rules import all_rules, kernel_check, normalize_quant
from crossover.advise.sweep_config import EmittedSweep, emit_sweep

__all__ = [
    "SCHEMA",
    "AdviceRequest",
    "AllReduceCurve",
    "AlphaBeta",
    "Calibration",
    "EmittedSweep",
    "EngineProfile",
    "GpuSpec",
    "Layout",
    "ModelFacts",
    "SweepResults",
    "System",
    "TableCurve",
    "advise",
    "all_rules",
    "emit_sweep",
    "find_gpu",
    "kernel_check",
    "known_gpus",
    "known_models",
    "load_calibration",
    "load_curve",
    "load_model",
    "load_results",
    "normalize_quant",
    "regimes_for",
    "system_from_flags",
    "system_from_nvml",
]
