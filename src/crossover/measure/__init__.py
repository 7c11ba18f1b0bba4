"""One load level against one endpoint: the library behind ``crossover run``.

Glue only: config -> tokenizer and prompts -> load strategy (dialect + transport)
-> records (SQLite, as they arrive) -> metrics. Sweeps call ``execute`` per level.

The package's names are importable from here; the modules hold, by what they are about:
the live counters (``progress``), the endpoint's headers, reachability probe and served
model (``probes``), the prompts and the tokenizer (``prompts``), the run's context,
samples and summary again from its records, and a stored run's heading (``summary``),
and the level's execution (``execution``).
"""

from crossover.measure.execution import Execution, RunOutcome, WorkersRunner, execute, new_run_id
from crossover.measure.probes import api_headers, probe, served_model
from crossover.measure.progress import Progress
from crossover.measure.prompts import (
    PROMPTS_AHEAD,
    PromptFeed,
    build_prompts,
    choose_tokenizer,
    prompts_needed,
    templates_by_turn,
)
from crossover.measure.summary import (
    ENGINE_COUNTER_SAMPLE,
    LOOP_SAMPLE,
    make_context,
    resummarize,
    run_title,
)

__all__ = [
    "ENGINE_COUNTER_SAMPLE",
    "LOOP_SAMPLE",
    "PROMPTS_AHEAD",
    "Execution",
    "Progress",
    "PromptFeed",
    "RunOutcome",
    "WorkersRunner",
    "api_headers",
    "build_prompts",
    "choose_tokenizer",
    "execute",
    "make_context",
    "new_run_id",
    "probe",
    "prompts_needed",
    "resummarize",
    "run_title",
    "served_model",
    "templates_by_turn",
]
