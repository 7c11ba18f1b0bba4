"""One vocabulary of model names across commands.

``advise`` and ``plan`` know models by the names in ``crossover/advise/data/models.yaml``
(each with its aliases: ``llama-3.1-8b`` is also ``llama-3-8b``, ``gemma-3-270m`` also
``gemma3-270m``); ``models synth`` names shapes, ``models fetch`` real models. Each of
those commands takes any name of a model's group and says which one it uses, so the name
one command prints is a name the others take.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml


@cache
def name_groups() -> tuple[frozenset[str], ...]:
    """Every known model's names (canonical and aliases), lower case, one set per model."""
    text = resources.files("crossover.advise").joinpath("data/models.yaml").read_text("utf-8")
    models = yaml.safe_load(text)["models"]
    return tuple(
        frozenset([key.lower(), *(str(a).lower() for a in entry.get("aliases", []))])
        for key, entry in models.items()
    )


def same_model(name: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The one of ``choices`` that names the same model as ``name`` (itself if it is one
    of them), or None."""
    if name in choices:
        return name
    want = name.lower()
    for group in name_groups():
        if want in group:
            return next((c for c in choices if c.lower() in group), None)
    return None


def other_names(name: str) -> list[str]:
    """The other short names (no ORG/) of ``name``'s model, for listings."""
    want = name.lower()
    for group in name_groups():
        if want in group:
            return sorted(n for n in group if n != want and "/" not in n)
    return []
