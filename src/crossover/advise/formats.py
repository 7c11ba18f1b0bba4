"""Weight formats: which ones the advisor weighs per engine, and what each costs in quality.

The data is ``data/formats.yaml``: a default list per engine (used unless ``--quant``
narrows it) and, per format, its quality cost against the 16-bit checkpoint, measured by
``crossover quality`` where it was (docs/results/quality/README.md) and cited otherwise.
Kernel availability per GPU architecture is ``rules.kernel_check`` (rule
seed-2-kernel-check); this module only says what to try and what it costs.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel

from crossover.advise.rules import kernel_check, kernels, normalize_quant
from crossover.errors import parse_names


class Quality(BaseModel):
    """A format's quality cost: what the row says, how it ranks, and where it comes from."""

    format: str
    cost: str
    rank: int  # 0: none (the 16-bit weights); higher: more loss
    measured: bool
    source: str


@cache
def _data() -> dict[str, Any]:
    text = resources.files("crossover.advise").joinpath("data/formats.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def default_formats(engine: str) -> list[str]:
    """The formats tried for ``engine`` when ``--quant`` does not narrow them."""
    return [str(q) for q in _data()["default"].get(engine, ["bf16"])]


def quality(quant: str) -> Quality:
    """The quality cost of ``quant``; an unlisted format says it is unknown."""
    raw = _data()["quality"].get(quant)
    if raw is None:
        return Quality(format=quant, cost="not known", rank=9, measured=False, source="none")
    return Quality(format=quant, **raw)


def parse_quants(text: str | None) -> list[str] | None:
    """``--quant fp8,gguf-q4_k_m``: canonical names, in order, once each (None: all)."""
    if text is None or not text.strip():
        return None
    names = [normalize_quant(x) for x in parse_names(text, "--quant")]
    return list(dict.fromkeys(names))


def kernel_table(sm_family: str) -> list[tuple[str, list[str], list[str], str]]:
    """Per engine: the formats with kernels on ``sm_family``, those without, and the
    table's source (rules.yaml ``kernels``; rule seed-2-kernel-check)."""
    out = []
    for engine, table in kernels().items():
        ok: list[str] = []
        no: list[str] = []
        for fmt in table["formats"]:
            (ok if kernel_check(engine, fmt, sm_family, None).ok else no).append(fmt)
        out.append((engine, ok, no, str(table["source"])))
    return out
