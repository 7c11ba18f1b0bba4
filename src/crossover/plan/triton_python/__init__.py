"""crossover's models for Triton's Python backend, as source files ``crossover plan`` copies
into a model repository (``<model>/1/model.py`` and ``<model>/1/crossover_triton_common.py``).

They run inside the Python-backend stub, not in crossover: they import
``triton_python_backend_utils`` (the stub provides it) and the engine (llama-cpp-python or
vLLM), and nothing from crossover. ``common`` holds what both share: the request's inputs
mapped to sampling settings, the responses, the generated-tokens counter
(``crossover_generated_tokens_total``, a ``pb_utils.MetricFamily`` that crossover reads as
the engine-counter witness) and the settings line ``verify-config`` reads from the log.
"""

from __future__ import annotations

from importlib import resources

COMMON_FILE = "crossover_triton_common.py"


def model_source(file: str) -> str:
    """The text of the model file ``file`` here (an engine spec's ``triton_hosted``
    names its own)."""
    source = resources.files(__package__).joinpath(file)
    if not file.endswith("_model.py") or not source.is_file():
        raise ValueError(f"no Triton Python-backend model {file!r}")
    return source.read_text("utf-8")


def common_source() -> str:
    return resources.files(__package__).joinpath("common.py").read_text("utf-8")
