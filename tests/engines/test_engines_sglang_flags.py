"""Every flag crossover can put on an SGLang command line exists in SGLang's own
``--help`` (0.5.17, captured on the H200 machine: tests/fixtures/sglang), with a value
among its choices where it has choices."""

from __future__ import annotations

import gzip
import itertools
import re
from functools import cache
from pathlib import Path

import pytest

from crossover.engines import EngineConfig
from crossover.engines.adapters import launch_spec
from crossover.engines.specs.sglang import NO_FUSED_ALLREDUCE as SGLANG_NO_FUSED_ALLREDUCE
from crossover.multicast import MULTICAST_OFF
from crossover.plan.commands import PlanLaunch, engine_argv

HELP = Path(__file__).parents[1] / "fixtures" / "sglang" / "sglang-0.5.17-launch-server-help.txt.gz"
PREFIX = ["python3", "-m", "sglang.launch_server"]


@cache
def sglang_options() -> dict[str, set[str] | None]:
    """``flag -> choices`` (None: any value, or none) from the help's option list."""
    text = gzip.decompress(HELP.read_bytes()).decode()
    options: dict[str, set[str] | None] = {}
    for line in text.splitlines():
        if not re.match(r"^  -", line):
            continue
        spec = re.split(r"\s{2,}", line[2:], maxsplit=1)[0]
        for part in spec.split(", "):
            m = re.match(r"(--?[A-Za-z][\w-]*)(?: \{([^}]*)\})?", part)
            if m:
                options[m.group(1)] = set(m.group(2).split(",")) if m.group(2) else None
    return options


def test_the_help_is_parsed() -> None:
    options = sglang_options()
    assert len(options) > 450
    assert options["--enable-metrics"] is None
    assert "fp8" in (options["--quantization"] or set())
    assert "dummy" in (options["--load-format"] or set())
    assert "--model" in options  # an alias on the same line as --model-path


def assert_known(argv: list[str]) -> None:
    options = sglang_options()
    for flag, value in itertools.zip_longest(argv, argv[1:]):
        if not flag.startswith("-"):
            continue
        name = flag.split("=", 1)[0]
        assert name in options, f"{name} is not an option of SGLang 0.5.17"
        choices = options[name]
        if choices is not None:
            assert value in choices, f"{name} {value}: not among {sorted(choices)}"


KNOBS: list[dict[str, object]] = [
    {},
    {"parallel": 64, "context_tokens": 4096, "max_batched_tokens": 8192},
    {"gpu_memory_utilization": 0.85, "load_format": "dummy", "dtype": "bfloat16"},
    {"dtype": "float16", "quant": "fp8", "cuda_graphs": True, "parallel": 512},
    {"cuda_graphs": False, "tp": 2, "pp": 2},
    {"cuda_graphs": True, "tp": 4, "dtype": "auto"},
]


@pytest.mark.parametrize("knobs", KNOBS)
def test_adapter_flags_exist(knobs: dict[str, object], tmp_path: Path) -> None:
    config = EngineConfig.model_validate({"engine": "sglang", "model": "/m", **knobs})
    spec = launch_spec(config, 30000, tmp_path)
    assert spec.argv[:3] == PREFIX
    assert_known(spec.argv[3:])


@pytest.mark.parametrize(
    "plan",
    [
        PlanLaunch(model="/m"),
        PlanLaunch(model="/m", tp=2, moe=True, cuda_graphs=False),
        PlanLaunch(model="/m", tp=4, pp=2, quant="fp8", online_quant=True, moe=True),
    ],
)
def test_plan_flags_exist(plan: PlanLaunch) -> None:
    argv, env, unset = engine_argv("sglang", plan)
    assert argv[:3] == PREFIX
    assert_known(argv[3:])
    assert env == MULTICAST_OFF and unset == []


def test_multicast_stays_off(tmp_path: Path) -> None:
    one = launch_spec(EngineConfig(engine="sglang", model="/m"), 30000, tmp_path)
    assert one.env_set == MULTICAST_OFF  # every start, as for vLLM
    assert SGLANG_NO_FUSED_ALLREDUCE not in one.argv
    two = launch_spec(EngineConfig(engine="sglang", model="/m", tp=2), 30000, tmp_path)
    assert two.argv.count(SGLANG_NO_FUSED_ALLREDUCE) == 1
    mine = EngineConfig(engine="sglang", model="/m", tp=2, env={"NCCL_NVLS_ENABLE": "1"})
    assert launch_spec(mine, 30000, tmp_path).env_set["NCCL_NVLS_ENABLE"] == "1"  # user's call


def test_cuda_graph_sizes_follow_parallel(tmp_path: Path) -> None:
    """``cuda_graphs: true`` asks for decode graphs up to ``parallel``: SGLang's own
    limit is 256 on an H200 (8 on a T4) and it clamps the sizes to max-running-requests."""
    on = EngineConfig(engine="sglang", model="/m", parallel=512, cuda_graphs=True)
    argv = launch_spec(on, 30000, tmp_path).argv
    assert argv[argv.index("--cuda-graph-max-bs") + 1] == "512"
    default = launch_spec(on.model_copy(update={"cuda_graphs": None}), 30000, tmp_path).argv
    assert "--cuda-graph-max-bs" not in default and "--disable-cuda-graph" not in default


@pytest.mark.parametrize(("engine", "flag"), [("sglang", "--enable-cache-report"),
                                              ("vllm", "--enable-prompt-tokens-details")])  # fmt: skip
def test_cached_prompt_tokens_are_asked_for_once(engine: str, flag: str, tmp_path: Path) -> None:
    """Every run's prefix-cache evidence (usage.prompt_tokens_details.cached_tokens) needs
    the flag; one the user already put in extra_args is not doubled."""
    argv = launch_spec(EngineConfig(engine=engine, model="/m"), 30000, tmp_path).argv
    assert argv.count(flag) == 1
    mine = EngineConfig(engine=engine, model="/m", extra_args=[flag])
    assert launch_spec(mine, 30000, tmp_path).argv.count(flag) == 1
    if engine == "sglang":
        assert_known(argv[len(PREFIX) :])
