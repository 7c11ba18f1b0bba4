"""The build's real progress: the object files a configured llama.cpp tree will compile
for llama-server, counted as they appear.

Fixtures, both real: tests/builds/fixtures/llama-server-plan/ is the configured tree of
the pinned llama.cpp on the 2-core machine (CMake's Makefile generator), cut to what the
plan reads (``CMakeFiles/Makefile2``'s dependency lines, each ``build.make``'s first rule
per object); tests/builds/fixtures/llama-server-cmake-build.log is that build's output."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from crossover.builds.plan import BuildPlan, closure, estimate_left_s, target_deps
from crossover.builds.progress import (
    BuildProgress,
    heartbeat_line,
    run_build_command,
    step_line,
)

FIXTURES = Path(__file__).parent / "fixtures"
PLAN = FIXTURES / "llama-server-plan"
LOG = FIXTURES / "llama-server-cmake-build.log"
_BUILDING = re.compile(r"^\[\s*\d+%\] Building \S+ object (\S+)$")


def _logged_objects() -> set[str]:
    return {m.group(1) for x in LOG.read_text().splitlines() if (m := _BUILDING.match(x))}


def test_plan_is_exactly_the_objects_the_build_compiled() -> None:
    plan = BuildPlan.read(PLAN, "llama-server")
    assert plan is not None
    # the recorded build compiled every object of the plan and nothing else
    assert plan.objects == _logged_objects()
    assert plan.total == 192 and plan.done() == 0
    assert "ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ggml-cpu.c.o" in plan.objects
    # the tree has other tools' targets; they are not llama-server's work
    assert not any(o.startswith("tools/cli/") for o in plan.objects)


def test_closure_follows_the_dependency_lines() -> None:
    deps = target_deps((PLAN / "CMakeFiles" / "Makefile2").read_text())
    need = closure(deps, "llama-server")
    assert "tools/server/CMakeFiles/llama-server" in need
    assert "ggml/src/CMakeFiles/ggml-cpu" in need  # through llama, not named directly
    assert "tools/cli/CMakeFiles/llama-cli" not in need
    assert closure(deps, "no-such-target") == set()


def test_no_plan_without_the_makefile_generator(tmp_path: Path) -> None:
    assert BuildPlan.read(tmp_path, "llama-server") is None  # a Ninja tree, or none
    shutil.copytree(PLAN, tmp_path / "b")
    assert BuildPlan.read(tmp_path / "b", "no-such-target") is None


@pytest.mark.parametrize(
    ("done", "start", "total", "elapsed", "left"),
    [
        (50, 0, 200, 100.0, 300.0),  # 2 s an object, 150 to go
        (60, 10, 110, 100.0, 100.0),  # objects there before the build do not count as speed
        (2, 0, 200, 100.0, None),  # too few to have a rate
        (50, 0, 200, 5.0, None),  # too soon
        (200, 0, 200, 100.0, 0.0),  # done
    ],
)
def test_estimate_left(
    done: int, start: int, total: int, elapsed: float, left: float | None
) -> None:
    assert estimate_left_s(done, start, total, elapsed) == left


def test_replayed_build_counts_objects_as_they_land(tmp_path: Path) -> None:
    """The recorded output replayed one line a second into a copy of the configured tree,
    each object file written when its target is built: the count rises from 0 to 192,
    the percent is that count's, and the line says the time so far and what is left."""
    shutil.copytree(PLAN, tmp_path / "b")
    plan = BuildPlan.read(tmp_path / "b", "llama-server")
    assert plan is not None
    state = BuildProgress(plan, started=0.0)
    by_target: dict[str, list[str]] = {}
    for o in plan.objects:
        by_target.setdefault(o.split("/CMakeFiles/")[1].split(".dir/")[0], []).append(o)
    counts: list[int] = []
    t = 0.0
    for line in LOG.read_text().splitlines():
        t += 1.0
        if m := re.match(r"^\[\s*\d+%\] Built target (\S+)$", line):
            for o in by_target.get(m.group(1), []):
                (tmp_path / "b" / o).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / "b" / o).write_bytes(b"")
        if not state.feed(line, t):
            continue
        assert state.count is not None
        counts.append(state.count[0])
        assert state.percent == pytest.approx(100.0 * state.count[0] / 192)
        if line == "[ 20%] Built target ggml-cpu":
            # cmake says 20%; the objects say where the build really is
            done = state.count[0]
            assert 0 < done < 192
            text = state.describe(t)
            assert text.startswith(f"{done}/192 objects, {int(t) // 60} min")
            assert "left" in text
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == 192
    assert state.counted(t) == f"192/192 objects, {int(t) // 60} min {int(t) % 60:02d} s"


def test_ninja_counts_its_own_steps() -> None:
    state = BuildProgress(started=0.0)
    assert state.feed("[12/180] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o", 30.0)
    assert state.count == (12, 180) and state.percent == pytest.approx(100 * 12 / 180)
    assert state.describe(30.0) == "12/180 steps, 30 s, about 7 min 00 s left"  # 168 at 2.5 s


def test_plain_lines_say_the_count_and_what_holds_the_build(tmp_path: Path) -> None:
    shutil.copytree(PLAN, tmp_path / "b")
    plan = BuildPlan.read(tmp_path / "b", "llama-server")
    assert plan is not None
    state = BuildProgress(plan, started=0.0)
    small = sorted(o for o in plan.objects if "ggml-cpu.c.o" not in o)[:40]
    for o in small:
        (tmp_path / "b" / o).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "b" / o).write_bytes(b"")
    cpu = "[ 10%] Building C object ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ggml-cpu.c.o"
    state.feed(cpu, 10.0)
    assert step_line(state, 10.0) == (
        "   20%  Building C ggml-cpu.c.o (40/192 objects, 10 s, about 38 s left)"
    )
    # three minutes on, nothing printed: the heartbeat names the compile it waits on
    line = heartbeat_line(state, 190.0, 10.0)
    assert line.startswith("   21%  40/192 objects, 3 min 10 s, about ")
    assert line.endswith("; waiting on ggml-cpu.c.o for 3 min 00 s")


def test_run_build_command_prints_counts_with_a_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not on a terminal, with the plan: the 10% lines are the objects' percent."""
    shutil.copytree(PLAN, tmp_path / "b")
    plan = BuildPlan.read(tmp_path / "b", "llama-server")
    assert plan is not None
    objs = sorted(plan.objects)
    # a build that compiles the plan's objects, one line each, writing each as it goes
    script = (
        (
            "import pathlib, sys\n"
            f"root = pathlib.Path({str(tmp_path / 'b')!r})\n"
            f"for i, o in enumerate({objs!r}):\n"
            "    print(f'[{i * 100 // len(objs):3d}%] Building C object {o}', flush=True)\n"
            "    p = root / o; p.parent.mkdir(parents=True, exist_ok=True); p.write_bytes(b'')\n"
            "    time.sleep(0.01)\n"
        )
        .replace("len(objs)", str(len(objs)))
        .replace("import pathlib", "import pathlib, time")
    )
    with (tmp_path / "build.log").open("w") as log:
        run_build_command([sys.executable, "-c", script], log, "building", True, True, plan)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "building ..."
    counts = [int(m.group(1)) for x in err[1:] if (m := re.search(r"\((\d+)/192 objects", x))]
    # every line carries the count; how many lines depends on how far the build got between
    # two reads (a loaded machine reads late), so at least a few, never a count going back
    assert len(counts) == len(err) - 1 >= 3
    assert counts == sorted(counts) and counts[-1] == 192
    assert plan.done() == 192


def test_a_finished_build_says_its_whole_count_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not on a terminal, with the plan: a build whose output runs ahead of its objects
    (every line said, then the objects written) still ends on the whole count."""
    shutil.copytree(PLAN, tmp_path / "b")
    plan = BuildPlan.read(tmp_path / "b", "llama-server")
    assert plan is not None
    objs = sorted(plan.objects)
    script = (
        "import pathlib, time\n"
        f"root = pathlib.Path({str(tmp_path / 'b')!r})\n"
        f"objs = {objs!r}\n"
        "for i, o in enumerate(objs):\n"
        "    print(f'[{i * 100 // len(objs):3d}%] Building C object {o}', flush=True)\n"
        "time.sleep(0.3)\n"
        "for o in objs:\n"
        "    p = root / o; p.parent.mkdir(parents=True, exist_ok=True); p.write_bytes(b'')\n"
    )
    with (tmp_path / "build.log").open("w") as log:
        run_build_command([sys.executable, "-c", script], log, "building", True, True, plan)
    err = capsys.readouterr().err.splitlines()
    counts = [int(m.group(1)) for x in err[1:] if (m := re.search(r"\((\d+)/192 objects", x))]
    assert counts and counts[-1] == 192, err
