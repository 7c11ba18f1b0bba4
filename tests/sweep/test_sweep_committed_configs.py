"""Every sweep config the GPU jobs run (scripts/*/), every one kept beside its results
(docs/**) and every example in the README and docs/*.md loads and builds each target's
launch command here, and passes ``crossover sweep --check --remote`` (their paths are the
GPU machine's), so a renamed setting fails on this machine, not after a GPU machine starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.engines import launch_spec
from crossover.engines.config import EngineConfig
from crossover.sweep.config import TargetConfig, load_sweep_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    p
    for folder in ("scripts", "docs")
    for p in (ROOT / folder).rglob("*.yaml")
    if re.search(r"^targets:", p.read_text(encoding="utf-8"), re.M)
)
#: ```yaml blocks of the README and docs/*.md that are sweep configs
EXAMPLES = [
    (path, block)
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for block in re.findall(r"^```yaml\n(.*?)^```", path.read_text(encoding="utf-8"), re.M | re.S)
    if re.search(r"^targets:", block, re.M)
]


def test_the_gpu_job_configs_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in CONFIGS}
    assert {"scripts/h200/sweep-a.yaml", "scripts/h200/sweep-b.yaml"} <= names


def _engine(target: TargetConfig) -> EngineConfig:
    assert target.launch is not None
    return target.launch.engine_config()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_committed_sweep_config_builds_every_launch(path: Path, tmp_path: Path) -> None:
    config = load_sweep_config(path)
    assert config.targets
    for target in config.targets:
        if target.launch is None:
            continue  # an already-running server (url:)
        spec = launch_spec(_engine(target), 8000, tmp_path)
        # bound to loopback unless told, as `--host 127.0.0.1` or `--http-address=127.0.0.1`
        assert any(a == "127.0.0.1" or a.endswith("=127.0.0.1") for a in spec.argv), spec.argv
        assert not any(a.endswith("0.0.0.0") for a in spec.argv), spec.argv


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_committed_sweep_config_passes_check_remote(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--config", str(path), "--check", "--remote"]) == 0, capsys.readouterr()


def test_the_doc_examples_are_found() -> None:
    assert {p.name for p, _ in EXAMPLES} >= {"README.md", "sweep-yaml.md"}


@pytest.mark.parametrize(
    ("path", "block"), EXAMPLES, ids=[f"{p.name}-{i}" for i, (p, _) in enumerate(EXAMPLES)]
)
def test_doc_example_passes_check_remote(
    path: Path, block: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "example.yaml"
    config.write_text(block, encoding="utf-8")
    assert main(["sweep", "--config", str(config), "--check", "--remote"]) == 0, (
        path,
        capsys.readouterr(),
    )


def test_nocache_llamacpp_targets_turn_the_prompt_cache_off(tmp_path: Path) -> None:
    config = load_sweep_config(ROOT / "scripts/h200/sweep-a.yaml")
    by_name = {t.name: t for t in config.targets}
    for name in ("llamacpp-graphs-nocache", "llamacpp-nographs"):
        argv = launch_spec(_engine(by_name[name]), 8000, tmp_path).argv
        assert argv[argv.index("--cache-ram") + 1] == "0"
    assert "--cache-ram" not in launch_spec(_engine(by_name["llamacpp-graphs"]), 1, tmp_path).argv
