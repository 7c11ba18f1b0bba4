"""``crossover sweep --ray``: targets as Ray actors on a real local Ray cluster.

The cluster is started here with Ray's own CLI: a head (``ray start --head``, custom
resource ``nodeA``) and a second node process (``ray start --address``, ``nodeB``), each
with its own logical CPUs, on this machine. The sweep runs as the command a user types,
in a child process that joins the cluster by address (never an in-process ``ray.init``:
the test process stays out of the cluster). Checked: each target lands on the node whose
resource it asks for, the targets run side by side, every run says where it ran, the
crossover is the one the same sweep finds without Ray (and the closed-form truth); a
node killed in the middle of a level fails that level (``node_lost``, its records that
reached the driver kept, its engine gone with it) and the same command redoes it once the
node is back; without ``--ray`` Ray is never imported; a bad address is one line, exit 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from crossover.engines.processes import free_port
from crossover.records.store import Store
from tests.engines.conftest import processes_mentioning
from tests.ggufs import stand_in_gguf

from .conftest import (
    Linear,
    child_env,
    crossover_cmd,
    db_runs,
    itl_crossover,
    read_sweep,
    servers,
    throughput_crossover,
)

pytestmark = pytest.mark.slow

RAY = Path(sys.executable).with_name("ray")
ENGINE = Path(__file__).with_name("calib_engine.py")

#: the crossover of test_sweep_crossover: A fast alone, B better under load (5.67, 6.41)
A = Linear(a_ms=2.0, b_ms=1.0, ttft_ms=5.0)
B = Linear(a_ms=6.2, b_ms=0.1, ttft_ms=15.0)
N = 16
LEVELS = [1, 2, 4, 8, 16]
#: repeats of the crossover test's sweeps
REPEATS = 3
#: as in test_sweep_crossover: the model's truth, widened by this share of it
MODEL_SLACK = 0.08

#: a dead node is noticed in about 5 s instead of Ray's default ~30 s (not faster: a
#: raylet slowed by this busy 2-core machine must not be taken for dead)
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "5",
}

_NODES = (
    "import json, sys, ray\n"
    "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
    "print(json.dumps([{'id': n['NodeID'], 'ip': n['NodeManagerAddress'], 'alive': n['Alive'],"
    " 'resources': n['Resources']} for n in ray.nodes()]))\n"
)


def _env() -> dict[str, str]:
    env = child_env()
    env.update(RAY_ENV)
    return env


@dataclass
class Cluster:
    address: str
    temp_dir: Path
    nodes_started: list[str] = field(default_factory=list)

    def ray(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(RAY), *args], capture_output=True, text=True, env=_env(), timeout=timeout_s,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done

    def start_node(self, resource: str) -> None:
        self.ray("start", "--address", self.address, "--num-cpus", "2",
                 "--resources", json.dumps({resource: 1}), "--disable-usage-stats")  # fmt: skip
        self.wait_for(resource, alive=True)

    def nodes(self) -> list[dict[str, Any]]:
        done = subprocess.run(
            [sys.executable, "-c", _NODES, self.address], capture_output=True, text=True,
            env=_env(), timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        nodes: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
        return nodes

    def node_with(self, resource: str) -> str:
        (node,) = [n for n in self.nodes() if n["alive"] and resource in n["resources"]]
        return str(node["id"])

    def wait_for(self, resource: str, alive: bool, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            live = [n for n in self.nodes() if n["alive"] and resource in n["resources"]]
            if bool(live) == alive:
                return
            assert time.monotonic() < deadline, f"node with {resource} alive={alive}: not seen"
            time.sleep(0.5)

    def kill_node(self, resource: str) -> list[int]:
        """SIGKILL the raylet of the node with ``resource`` and every process under it (its
        workers, so the target's actor, and what they started): the node dies at once."""
        raylets = [
            pid for pid in processes_mentioning(resource)
            if Path(_cmdline(pid)[0]).name == "raylet"
        ]  # fmt: skip
        assert len(raylets) == 1, raylets
        victims = [*_descendants(raylets[0]), raylets[0]]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return victims


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return [""]
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a] or [""]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head with resource nodeA and a second node with nodeB, 2 logical CPUs each."""
    # a short path: Ray's socket paths under it must stay within the kernel's limit
    temp_dir = Path(tempfile.mkdtemp(prefix="xray", dir="/tmp"))
    port = free_port()
    c = Cluster(f"127.0.0.1:{port}", temp_dir)
    try:
        c.ray("start", "--head", "--port", str(port), "--num-cpus", "2",
              "--resources", json.dumps({"nodeA": 1}), "--temp-dir", str(temp_dir),
              "--include-dashboard=false", "--disable-usage-stats")  # fmt: skip
        c.start_node("nodeB")
        yield c
    finally:
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True, env=_env(),
                       timeout=120, check=False)  # fmt: skip
        shutil.rmtree(temp_dir, ignore_errors=True)


def _sweep_yaml(path: Path, targets: list[dict[str, Any]], **extra: Any) -> Path:
    cfg = {
        "name": "ray",
        "targets": targets,
        "concurrency": LEVELS,
        "repeats": 2,
        "output_tokens": N,
        "input_tokens": 16,
        "duration_s_per_level": 0.4,
        "warmup_requests": 0,
        "client_floor": "off",
        "scrape_interval_s": 0.2,
    }
    cfg.update(extra)
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(*args: str, timeout_s: float = 240.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(crossover_cmd(*args), capture_output=True, text=True, env=_env(),
                          timeout=timeout_s, check=False)  # fmt: skip


def _xs(sweep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {x["metric"]: x for x in sweep["crossovers"]}


def _padded(x: dict[str, Any], truth: float) -> tuple[float, float]:
    lo, hi = x["interval"]
    return lo - MODEL_SLACK * truth, hi + MODEL_SLACK * truth


# --- without a cluster ---------------------------------------------------------------


def test_without_ray_nothing_imports_it_and_runs_are_local(tmp_path: Path) -> None:
    out = tmp_path / "local"
    script = (
        "import sys\n"
        "from crossover.cli.app import main\n"
        "rc = main(sys.argv[1:])\n"
        "print('RAY-IMPORTED' if 'ray' in sys.modules else 'RAY-ABSENT')\n"
        "sys.exit(rc)\n"
    )
    with servers(A) as (url,):
        done = subprocess.run(
            [sys.executable, "-c", script, "sweep", "--target",
             f"A={url},engine=vllm,model=calibration", "--concurrency", "1,2",
             "--requests-per-level", "4", "--output-tokens", "4", "--input-tokens", "8",
             "--out", str(out), "--no-report"],
            capture_output=True, text=True, env=child_env(), timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "RAY-ABSENT"
    runs = read_sweep(out)["runs"]
    assert len(runs) == 2
    assert all(r["placement"] == {"backend": "local"} for r in runs)


@pytest.mark.parametrize(
    ("address", "said"),
    [("not an address", "expected auto, HOST:PORT"), ("127.0.0.1:{free}", "nothing answers")],
)
def test_bad_ray_address_is_one_line_exit_2(tmp_path: Path, address: str, said: str) -> None:
    out = tmp_path / "out"
    address = address.format(free=free_port())
    done = _run("sweep", "--target", "A=http://127.0.0.1:9,model=m", "--concurrency", "1",
                "--output-tokens", "4", "--out", str(out), "--ray", address, timeout_s=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()  # a mistake writes nothing


def test_ray_missing_is_one_line_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from crossover.cli.app import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as if not installed
    out = tmp_path / "out"
    rc = main(["sweep", "--target", "A=http://127.0.0.1:9,model=m", "--concurrency", "1",
               "--output-tokens", "4", "--out", str(out), "--ray", "auto"])  # fmt: skip
    assert rc == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "pip install 'crossover[ray]'" in lines[0], lines
    assert not out.exists()


def test_resources_default_to_the_engines_gpus() -> None:
    from crossover.sweep.cluster import parse_address
    from crossover.sweep.config import build_sweep_config, ray_resources

    cfg = build_sweep_config({
        "concurrency": [1], "output_tokens": 4,
        "targets": [
            {"name": "url", "url": "http://h:1", "model": "m"},
            {"name": "tp2", "launch": {"engine": "vllm", "model": "m", "tp": 2}},
            {"name": "dp2", "launch": {"engine": "vllm", "model": "m", "replicas": 2,
                                        "gpus_per_replica": 2}},
            {"name": "cpu", "resources": {"GPU": 0, "nodeB": 1, "CPU": 3},
             "launch": {"engine": "llamacpp", "model": "/m.gguf"}},
        ],
    })  # fmt: skip
    got = {t.name: ray_resources(t) for t in cfg.targets}
    assert got == {
        "url": {"CPU": 1.0},
        "tp2": {"CPU": 1.0, "GPU": 2.0},
        "dp2": {"CPU": 1.0, "GPU": 4.0},
        "cpu": {"CPU": 3.0, "nodeB": 1.0},
    }
    assert parse_address("auto") is None
    assert parse_address("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert parse_address("ray://head-svc:10001") == ("head-svc", 10001)


def test_ray_asks_for_one_launchs_gpus_as_the_check_counts_them() -> None:
    """extra_args' -tp counts (the engine would fail on a 1-GPU actor); replicas without
    gpus_per_replica share the actor's GPUs, so they ask for one launch's, not N times."""
    from crossover.sweep.check import _launch_gpus
    from crossover.sweep.config import build_sweep_config, ray_resources

    cfg = build_sweep_config({
        "concurrency": [1], "output_tokens": 4,
        "targets": [
            {"name": "extra", "launch": {"engine": "vllm", "model": "m",
                                         "extra_args": ["-tp", "4"]}},
            {"name": "shared", "launch": {"engine": "sglang", "model": "m", "tp": 2,
                                          "replicas": 3}},
            {"name": "pp", "launch": {"engine": "vllm", "model": "m", "tp": 2,
                                      "extra_args": ["--pipeline-parallel-size=2"]}},
            {"name": "gguf", "launch": {"engine": "llamacpp", "model": "/m.gguf",
                                        "replicas": 2}},
        ],
    })  # fmt: skip
    got = {t.name: ray_resources(t).get("GPU") for t in cfg.targets}
    assert got == {"extra": 4.0, "shared": 2.0, "pp": 4.0, "gguf": 1.0}
    for t in cfg.targets[:3]:  # the number the up-front check compares
        ask = _launch_gpus(t)
        assert ask is not None and float(ask.count) == got[t.name]


def test_replicas_get_the_gpus_ray_assigned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crossover.sweep.config import build_sweep_config
    from crossover.sweep.level import TargetSession
    from crossover.sweep.scrape import NVMLSampler

    cfg = build_sweep_config({"concurrency": [1], "output_tokens": 4, "targets": [
        {"name": "dp", "launch": {"engine": "vllm", "model": "m", "replicas": 2,
                                  "gpus_per_replica": 2}}]})  # fmt: skip
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    here = TargetSession(cfg.targets[0], cfg, tmp_path, NVMLSampler())
    assert [here.replica_gpus(k, 2) for k in (0, 1)] == ["0,1", "2,3"]
    ray_gave = TargetSession(cfg.targets[0], cfg, tmp_path, NVMLSampler(),
                             visible_gpus=["4", "5", "6", "7"])  # fmt: skip
    assert [ray_gave.replica_gpus(k, 2) for k in (0, 1)] == ["4,5", "6,7"]


# --- on the cluster ------------------------------------------------------------------


def test_targets_placed_by_resource_in_parallel_with_the_local_crossover(
    tmp_path: Path, cluster: Cluster
) -> None:
    node_a, node_b = cluster.node_with("nodeA"), cluster.node_with("nodeB")
    assert node_a != node_b
    ips = {n["id"]: n["ip"] for n in cluster.nodes()}
    with servers(A, B) as (url_a, url_b):
        targets = [
            {"name": "A", "url": url_a, "engine": "vllm", "model": "calibration",
             "resources": {"nodeA": 1}},
            {"name": "B", "url": url_b, "engine": "vllm", "model": "calibration",
             "resources": {"nodeB": 1}},
        ]  # fmt: skip
        config = _sweep_yaml(tmp_path / "sweep.yaml", targets, repeats=REPEATS)
        local = _run("sweep", "--config", str(config), "--out", str(tmp_path / "local"),
                     "--no-report")  # fmt: skip
        assert local.returncode == 0, local.stderr[-3000:]
        started = time.monotonic()
        on_ray = _run("sweep", "--config", str(config), "--out", str(tmp_path / "ray"),
                      "--no-report", "--ray", cluster.address)  # fmt: skip
        ray_s = time.monotonic() - started
        assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    sweep = read_sweep(tmp_path / "ray")
    runs = sweep["runs"]
    assert {(r["target"], r["concurrency"], r["repeat"]) for r in runs} == {
        (t, c, k) for t in "AB" for c in LEVELS for k in range(REPEATS)
    }
    for r in runs:
        assert r["summary"]["verdict"] == "valid", r["summary"]["problems"]
        p = r["placement"]
        assert p["backend"] == "ray"
        assert p["node_id"] == (node_a if r["target"] == "A" else node_b), (r["target"], p)
        assert p["node_ip"] == ips[p["node_id"]]
    # side by side: B's first run began before A's last one did
    rows = db_runs(tmp_path / "ray")
    first_b = min(x.created_at for x in rows if x.key and x.key.startswith("B|"))
    last_a = max(x.created_at for x in rows if x.key and x.key.startswith("A|"))
    assert first_b < last_a, "the targets ran one after another"
    # the same crossovers as the local sweep, both around the closed-form truth
    local_xs, ray_xs = _xs(read_sweep(tmp_path / "local")), _xs(sweep)
    truths = {"itl_ms.p50": itl_crossover(A, B), "tpot_ms.p50": itl_crossover(A, B),
              "total_tokens_per_s": throughput_crossover(A, B, N)}  # fmt: skip
    for metric, truth in truths.items():
        lx, rx = local_xs[metric], ray_xs[metric]
        assert (lx["below"], lx["above"]) == (rx["below"], rx["above"]) == ("A", "B"), (lx, rx)
        for x in (lx, rx):
            lo, hi = _padded(x, truth)
            assert lo <= truth <= hi, (metric, truth, x)
        (llo, lhi), (rlo, rhi) = _padded(lx, truth), _padded(rx, truth)
        assert llo <= rhi and rlo <= lhi, (metric, lx, rx)  # the intervals overlap
    assert "ttft_ms.p50" not in ray_xs and "ttft_ms.p50" not in local_xs
    print(f"ray sweep wall time {ray_s:.1f} s")


def _launched_b(tmp_path: Path) -> dict[str, Any]:
    settings = tmp_path / "calibration.json"
    settings.write_text(json.dumps({"ttft_ms": 5.0, "itl_ms": 5.0}))
    model = tmp_path / "model.gguf"
    stand_in_gguf(model)
    return {
        "name": "B",
        "model": "calibration",
        "resources": {"nodeB": 1, "GPU": 0},
        "launch": {
            "engine": "llamacpp",
            "model": str(model),
            "executable": [sys.executable, str(ENGINE)],
            "parallel": 4,
            "health_timeout_s": 60,
            "env": {"CALIB_ENGINE_CONFIG": str(settings)},
        },
    }


def _in_flight(out: Path, key: str, after: str | None = None) -> bool:
    """Run ``key`` is running and has records in the driver's database (and run ``after``,
    if given, is done)."""
    if not (out / "sweep.db").exists():
        return False
    try:
        with Store(out / "sweep.db") as store:
            runs = {r.key: r for r in store.runs()}
            if after is not None and (after not in runs or runs[after].status != "done"):
                return False
            run = runs.get(key)
            return run is not None and run.status == "running" and bool(store.records(run.run_id))
    except Exception:  # the driver is creating the database right now
        return False


def _gone(text: str, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while processes_mentioning(text) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_mentioning(text) == []


def test_killed_node_fails_its_level_and_resume_redoes_it(tmp_path: Path, cluster: Cluster) -> None:
    out = tmp_path / "out"
    with servers(A) as (url_a,):
        targets = [
            {"name": "A", "url": url_a, "engine": "vllm", "model": "calibration",
             "resources": {"nodeA": 1}},
            _launched_b(tmp_path),
        ]  # fmt: skip
        config = _sweep_yaml(tmp_path / "sweep.yaml", targets, concurrency=[1, 2, 4], repeats=1,
                             output_tokens=8, duration_s_per_level=4.0)  # fmt: skip
        argv = crossover_cmd("sweep", "--config", str(config), "--out", str(out), "--no-report",
                             "--ray", cluster.address)  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env())  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not _in_flight(out, "B|c=2|r=0", after="B|c=1|r=0"):
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "B's second level never got going"
                time.sleep(0.05)
            cluster.kill_node("nodeB")
            stdout, stderr = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 3, stderr[-3000:]  # a failed level: not a clean sweep
        assert "node_lost" in stderr, stderr[-3000:]
        assert "failed level" in stdout
        with Store(out / "sweep.db") as store:
            status = {r.key: r.status for r in store.runs()}
            (lost,) = [r for r in store.runs() if r.status == "failed"]
            kept = len(store.records(lost.run_id))
        assert lost.key == "B|c=2|r=0"
        assert kept >= 1  # what reached the driver before the node died stays
        assert status == {"A|c=1|r=0": "done", "A|c=2|r=0": "done", "A|c=4|r=0": "done",
                          "B|c=1|r=0": "done", "B|c=2|r=0": "failed"}, status  # fmt: skip
        sweep = read_sweep(out)
        failed = next(r for r in sweep["runs"] if r["target"] == "B" and r["concurrency"] == 2)
        assert failed["summary"]["verdict"] == "invalid"
        assert [p["code"] for p in failed["summary"]["problems"] if p["severity"] == "error"] == [
            "node_lost"
        ]
        assert all(r["placement"]["backend"] == "ray" for r in sweep["runs"])
        # the engine died with its node (PR_SET_PDEATHSIG from the actor's loop thread)
        assert _gone(str(tmp_path / "model.gguf"))
        # its log came back to the driver while it ran
        assert "n_slots = 4" in (out / "engines" / "B.log").read_text()

        # the node is back: the same command redoes the lost level and the one never run
        cluster.wait_for("nodeB", alive=False)
        cluster.start_node("nodeB")
        again = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=240,
                               check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    with Store(out / "sweep.db") as store:
        done = sorted(r.key or "" for r in store.runs() if r.status == "done")
    assert done == sorted(f"{t}|c={c}|r=0" for t in "AB" for c in (1, 2, 4))
    sweep = read_sweep(out)
    assert [r["summary"]["verdict"] for r in sweep["runs"]] == ["valid"] * 6
    node_b = cluster.node_with("nodeB")
    redone = [r for r in sweep["runs"] if r["target"] == "B" and r["concurrency"] in (2, 4)]
    assert all(r["placement"]["node_id"] == node_b for r in redone)
    assert "2 runs measured, 4 kept from before" in again.stdout.replace("\n", " ")


def test_ctrl_c_stops_the_busy_actor_and_its_engine(tmp_path: Path, cluster: Cluster) -> None:
    out = tmp_path / "out"
    config = _sweep_yaml(tmp_path / "sweep.yaml", [_launched_b(tmp_path)], concurrency=[1, 2],
                         repeats=1, output_tokens=8, duration_s_per_level=6.0)  # fmt: skip
    argv = crossover_cmd("sweep", "--config", str(config), "--out", str(out), "--no-report",
                         "--ray", cluster.address)  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _in_flight(out, "B|c=1|r=0"):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the level never got going"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    with Store(out / "sweep.db") as store:
        (run,) = store.runs()
        assert run.status == "interrupted"
        assert store.records(run.run_id)  # what was received before Ctrl-C is kept
    assert _gone(str(tmp_path / "model.gguf"))  # the engine is stopped
    assert _gone("TargetActor")  # and the actor ended


def test_workers_spread_over_nodes_each_on_its_own_clock(tmp_path: Path, cluster: Cluster) -> None:
    out = tmp_path / "out"
    with servers(A) as (url,):
        config = _sweep_yaml(
            tmp_path / "sweep.yaml",
            [{"name": "A", "url": url, "engine": "vllm", "model": "calibration"}],
            concurrency=[4], repeats=1, duration_s_per_level=None, requests_per_level=48,
            workers=2,
        )  # fmt: skip
        done = _run("sweep", "--config", str(config), "--out", str(out), "--no-report",
                    "--ray", cluster.address)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with Store(out / "sweep.db") as store:
        (run,) = store.runs()
        records = store.records(run.run_id, include_warmup=False)
    assert len(records) == 48
    nodes_of = {w: {r.node for r in records if r.worker == w} for w in (0, 1)}
    # each worker on one node, the two on different nodes (Ray's SPREAD over two nodes)
    assert all(len(v) == 1 and None not in v for v in nodes_of.values()), nodes_of
    assert nodes_of[0] != nodes_of[1], nodes_of
    assert {n for v in nodes_of.values() for n in v} == {
        cluster.node_with("nodeA"),
        cluster.node_with("nodeB"),
    }
    (summary,) = [r["summary"] for r in read_sweep(out)["runs"]]
    assert summary["verdict"] == "valid", summary["problems"]
    assert summary["load"]["workers"] == 2
    # two windows of 2 streams each: about 4 in flight in all, throughput the sum of both
    assert 3.0 <= summary["load"]["achieved_concurrency"] <= 4.5, summary["load"]
    one_request_s = A.request_ms(4, N) / 1000
    expected = 4 * (16 + N) / one_request_s  # c requests of (prompt + N) tokens each
    assert 0.6 * expected <= summary["throughput"]["total_tokens_per_s"] <= 1.3 * expected
