"""Predictions against the project's measured reference figures, error reported.

The cost model is a roofline upper bound; this module says by how much it misses the
measurements in ``data/references.yaml`` (gpu-recipes.md), so the error is visible
rather than tuned away.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel

from crossover.advise import cost
from crossover.advise.cost import Layout
from crossover.advise.hardware import system_from_flags
from crossover.advise.model import load_model


class Comparison(BaseModel):
    reference: str
    engine: str
    concurrency: int
    measured_output_tok_s: float
    predicted_output_tok_s: float
    error_pct: float  # (predicted - measured) / measured
    measured_fraction_of_prediction: float
    source: str


def references() -> list[dict[str, Any]]:
    text = resources.files("crossover.advise").joinpath("data/references.yaml").read_text("utf-8")
    rows: list[dict[str, Any]] = yaml.safe_load(text)["references"]
    return rows


def compare_references() -> list[Comparison]:
    out: list[Comparison] = []
    for ref in references():
        system = system_from_flags(ref["gpu"], int(ref["gpus"]), ref.get("interconnect"))
        layout = Layout(tp=int(ref.get("tp", 1)), pp=int(ref.get("pp", 1)))
        model = load_model(ref["model"])
        curve = cost.default_curve(system)
        for conc, measured in sorted(ref["output_tok_s"].items()):
            pred = cost.predict(
                model,
                system,
                layout,
                ref["quant"],
                curve,
                concurrency=int(conc),
                input_tokens=int(ref["input_tokens"]),
                output_tokens=int(ref["output_tokens"]),
            )
            out.append(
                Comparison(
                    reference=ref["id"],
                    engine=ref["engine"],
                    concurrency=int(conc),
                    measured_output_tok_s=float(measured),
                    predicted_output_tok_s=pred.output_tok_s,
                    error_pct=(pred.output_tok_s - measured) / measured * 100,
                    measured_fraction_of_prediction=measured / pred.output_tok_s,
                    source=ref["source"],
                )
            )
    return out
