"""The build's progress read from real cmake output: llama-server built with -j2 on the
2-core machine (tests/builds/fixtures/llama-server-cmake-build.log, the cmake build's log
as crossover wrote it, paths shortened), where ggml-cpu.c compiles for minutes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crossover.builds.progress import WAITING_AFTER_S, BuildProgress, run_build_command

LOG = Path(__file__).parent / "fixtures" / "llama-server-cmake-build.log"


def test_real_cmake_output_rises_to_100_and_names_what_it_waits_on() -> None:
    lines = LOG.read_text().splitlines()
    link = lines.index("[ 19%] Linking CXX static library libggml-cpu.a")
    state = BuildProgress()
    seen: list[float] = []
    t = 0.0
    for i, line in enumerate(lines):
        # one line a second, except before ggml-cpu's link: the other job is done and
        # ggml-cpu.c still compiles (2 min 30 s)
        t += 150.0 if i == link else 1.0
        if i == link:
            wait = state.waiting(t - 1.0)
            assert wait is not None and wait.startswith("ggml-cpu.c.o for 2 min")
            assert "waiting on ggml-cpu.c.o" in state.describe(t - 1.0)
            # the last line's step is another file, done long ago
            assert state.step != "Building C ggml-cpu.c.o"
            assert state.waiting(t - 150.0 + WAITING_AFTER_S / 2) is None  # not yet
        if state.feed(line, t):
            seen.append(state.percent)
        if line == "[ 20%] Built target ggml-cpu":
            assert "ggml-cpu.c.o" not in state.pending
    assert len(seen) == sum(1 for x in lines if x.startswith("["))
    assert seen == sorted(seen) and seen[0] == 0.0 and seen[-1] == 100.0
    assert state.step == "Linking CXX executable ../../bin/llama-server" or state.step.startswith(
        "Built target"
    )


def test_plain_output_one_line_per_tenth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not on a terminal: a line at each 10% step of the real output, in order."""
    script = f"print(open({str(LOG)!r}).read(), end='')"
    with (tmp_path / "build.log").open("w") as log:
        run_build_command([sys.executable, "-c", script], log, "building", True, True)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "building ..."
    steps = [(int(x.split("%")[0]), x.split("%  ")[1]) for x in err[1:]]
    assert [s // 10 for s, _ in steps] == list(range(11))
    assert steps[1] == (10, "Building C ggml-cpu.c.o")
    assert steps[-1] == (100, "Building CXX main.cpp.o")
