"""Deployment artifacts: everything needed to build and serve one configuration.

Public API::

    from crossover.plan import PlanRequest, make_plan, write_plan
    plan = make_plan(PlanRequest(engine=name, model="llama-3.1-8b", tp=2, quant="fp8"))
    write_plan(plan, Path("out"))

where ``name`` is an engine whose spec has the ``plan`` trait
(``crossover.engines.registry.with_trait("plan")``).

A plan is a set of files (``build.sh``, ``serve.sh``, YAML, a Triton model repository)
plus ``plan.json``, whose ``expect`` block (``cuda_graphs``, ``tp``, ``quant``) is what
``crossover verify-config --plan plan.json`` checks against the running engine.
"""

from __future__ import annotations

from crossover.plan.builder import PLAN_SCHEMA, make_plan, write_plan
from crossover.plan.request import Plan, PlanRequest

__all__ = ["PLAN_SCHEMA", "Plan", "PlanRequest", "make_plan", "write_plan"]
