"""What crossover asked at launch, checked against what the engine's log says it took.

The launch record (``# crossover-launch:``, the log's first line) holds the argv the
adapter built. Where an engine reports a flag's value back one to one (SGLang's
``ServerArgs`` and scheduler lines, vLLM's engine config line, llama-server's slot
count), a difference is a setting that did not take effect as asked: SGLang lowering
``max_running_requests`` to fit memory, a deprecated alias ignored, a value overridden
by a config file. Flags whose logged value means something else (``-ngl 999`` against
the layers offloaded) are not listed.
"""

from __future__ import annotations

from collections.abc import Iterable

from crossover.engines import logpatterns as lp
from crossover.engines.effective import Check, EffectiveSettings, values_match

#: launch flags whose value the engine's log reports back one to one: flag -> setting
ASKED_VALUES: dict[str, dict[str, str]] = {
    "sglang": {
        "--tp-size": "tp", "--tensor-parallel-size": "tp", "--pp-size": "pp",
        "--pipeline-parallel-size": "pp", "--ep-size": "ep",
        "--max-running-requests": "parallel_slots", "--context-length": "context_tokens",
        "--chunked-prefill-size": "max_batched_tokens",
        "--mem-fraction-static": "gpu_memory_utilization", "--dtype": "dtype",
        "--quantization": "quant", "--cuda-graph-max-bs": "cuda_graph_max_bs",
        "--cuda-graph-max-bs-decode": "cuda_graph_max_bs", "--load-format": "load_format",
        "--schedule-policy": "schedule_policy", "--tokenizer-worker-num": "tokenizer_workers",
        "--stream-interval": "stream_interval", "--attention-backend": "attention_backend",
    },
    "vllm": {
        "--tensor-parallel-size": "tp", "-tp": "tp", "--pipeline-parallel-size": "pp",
        "-pp": "pp", "--max-model-len": "context_tokens",
        "--max-num-batched-tokens": "max_batched_tokens",
        "--gpu-memory-utilization": "gpu_memory_utilization", "--quantization": "quant",
        "-q": "quant", "--dtype": "dtype",
    },
    "llamacpp": {"-np": "parallel_slots", "--parallel": "parallel_slots"},
}  # fmt: skip
#: switches (no value) and the setting value they ask for
ASKED_SWITCHES: dict[str, dict[str, tuple[str, lp.Value]]] = {
    "sglang": {
        "--disable-cuda-graph": ("cuda_graphs", False),
        "--enable-metrics": ("metrics", True),
        "--enable-mixed-chunk": ("mixed_chunk", True),
        "--enable-torch-compile": ("torch_compile", True),
    },
    "vllm": {"--enforce-eager": ("cuda_graphs", False)},
}
#: values that leave the choice to the engine: nothing to check them against
_ENGINE_CHOOSES = {"auto", "-1"}


def _typed(raw: str) -> lp.Value:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def asked(engine: str, argv: list[str]) -> dict[str, tuple[lp.Value, str]]:
    """``setting -> (asked value, the flag as given)`` from a launch argv (last one wins,
    as argparse does)."""
    values = ASKED_VALUES.get(engine, {})
    switches = ASKED_SWITCHES.get(engine, {})
    out: dict[str, tuple[lp.Value, str]] = {}
    for i, arg in enumerate(argv):
        flag, eq, inline = arg.partition("=")
        if flag in values:
            raw = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            if raw is not None and raw.strip().lower() not in _ENGINE_CHOOSES:
                out[values[flag]] = (_typed(raw), f"{flag} {raw}")
        elif arg in switches:
            setting, value = switches[arg]
            out[setting] = (value, arg)
    return out


def asked_checks(settings: EffectiveSettings, skip: Iterable[str] = ()) -> list[Check]:
    """One check per asked setting the log reports (``skip``: settings the user's own
    expectations already cover). A setting the log does not report is left out: the
    launch value is then only what was requested, shown as such among the facts."""
    if settings.launch is None:
        return []
    skipped = set(skip)
    checks: list[Check] = []
    for setting, (value, flag) in asked(settings.engine, settings.launch.argv).items():
        fact = settings.facts.get(setting)
        if setting in skipped or fact is None or fact.value is None:
            continue
        if fact.basis not in ("log", "log-absence"):
            continue
        same = values_match(value, fact.value)
        checks.append(
            Check(
                setting=setting,
                expected=value,
                effective=fact.value,
                status="match" if same else "mismatch",
                basis=fact.basis,
                evidence=fact.evidence,
                line=fact.line,
                note=f"asked at launch: {flag}",
                source="launch",
            )
        )
    return checks
