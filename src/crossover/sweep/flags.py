"""``crossover sweep``'s flags as a ``SweepConfig``: over a YAML's keys (``--config``) or
with ``--target NAME=URL`` in place of one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crossover.errors import UsageError, parse_list
from crossover.spec.target import parse_target
from crossover.spec.workload import prompt_lengths_input, sessions_of
from crossover.sweep.config import SweepConfig, build_sweep_config, load_sweep_config

if TYPE_CHECKING:
    from pathlib import Path


def sweep_config_of(
    flags: dict[str, Any],
    *,
    config: Path | None,
    target: list[str] | None,
    engine: str | None,
    model: str | None,
    concurrency: str | None,
    rates: str | None,
    turns: int | None,
    think_s: float | None,
    refine: bool,
    prompt_lengths: str | None,
) -> SweepConfig:
    """The sweep ``flags`` (the YAML keys the command's flags set; None where not given)
    with ``--concurrency``/``--rates``, ``--turns``/``--think-s`` and ``--refine`` added,
    over the YAML at ``config`` or as the config of the ``--target`` list (``engine`` and
    ``model``: their defaults); ``--prompt-lengths`` other than ``fit`` sends each prompt
    as written. A mistake in any of them is a ``UsageError`` naming its flag."""
    flags = dict(flags)
    if (sessions := sessions_of(turns, think_s)) is not None:  # as run: one turn is none
        flags["sessions"] = sessions
    if refine:
        flags["refine"] = True
    if concurrency is not None and rates is not None:
        raise UsageError("give --concurrency or --rates, not both")
    if concurrency is not None:
        flags["concurrency"] = parse_list(concurrency, "--concurrency")
    if rates is not None:
        flags["rates"] = parse_list(rates, "--rates", float)
    if config is not None:
        if target:
            raise UsageError("give --config or --target, not both")
        cfg = load_sweep_config(config, flags)
    else:
        if not target:
            raise UsageError("give --config sweep.yaml or at least one --target NAME=URL")
        data = {k: v for k, v in flags.items() if v is not None}
        data["targets"] = [parse_target(t, engine, model) for t in target]
        if "output_tokens" not in data:
            raise UsageError("--output-tokens is required")
        if "concurrency" not in data and "rates" not in data:
            raise UsageError("--concurrency (e.g. 1,2,4,8) or --rates (e.g. 2,4,8) is required")
        cfg = build_sweep_config(data)
    if prompt_lengths not in (None, "fit"):  # each prompt as written, the same to all
        prompt_lengths_input(prompt_lengths, cfg.prompts_file, None)
        cfg = cfg.model_copy(update={"input_tokens": None, "input_lengths": None})
    return cfg
