"""``plan.commands``: a plan's launch line is the launch a sweep would make."""

from __future__ import annotations

from pathlib import Path

from crossover.engines.adapters import launch_spec
from crossover.engines.registry import engine_config
from crossover.plan.commands import PlanLaunch, engine_argv


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_vllm_plan_carries_the_budget_and_memory_share_as_adapter_settings() -> None:
    s = PlanLaunch(model="/m", tp=2, max_concurrency=128, max_seq_len=2048, max_num_tokens=4096)
    argv, env, _ = engine_argv("vllm", s)
    assert _flag(argv, "--max-num-batched-tokens") == "4096"
    assert _flag(argv, "--gpu-memory-utilization") == "0.9"
    assert argv.count("--max-num-batched-tokens") == 1  # once: not also as an extra arg
    # the same argv a sweep target with these settings gets from the adapter
    same = launch_spec(
        engine_config(
            engine="vllm", model="/m", tp=2, parallel=128, context_tokens=2048,
            max_batched_tokens=4096, gpu_memory_utilization=0.9, cuda_graphs=True,
        ),
        8000,
        Path("."),
    )  # fmt: skip
    assert argv == list(same.argv)
    assert env == dict(same.env_set)
