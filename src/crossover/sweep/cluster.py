"""The driver side of a sweep on a Ray cluster (``crossover sweep --ray ADDRESS|auto``).

``RayCluster.connect`` joins an existing cluster (nothing is started here: the cluster is
the user's, ``ray start`` or KubeRay) and checks that some node can hold each target's
resources (``crossover.sweep.config.ray_resources``) before anything is written.
``RayTarget`` is one target's handle: a ``TargetActor`` (``crossover.sweep.actor``)
created with those resources, so Ray places it, its engine and its load on a node that
has them, and runs targets side by side while the cluster has room. While the actor
works, the driver takes its outbox every ``RELAY_WAIT_S`` and writes it into the one
``sweep.db`` (records, samples, the run's status) and ``engines/`` (the logs).

A node that dies (or an actor that does) ends that target for this sweep: the level in
flight is summarized from the records that reached the driver and marked failed with
``node_lost``; the next run of the same command redoes it and the target's other levels.
Ray is imported only here and in the actor, and only with ``--ray``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from pathlib import Path
from typing import Any

from crossover.analysis import TargetInfo
from crossover.engines.effective import keep_earlier_log
from crossover.errors import CrossoverError, EngineError, NodeLostError, UsageError
from crossover.measure import Progress, make_context, resummarize
from crossover.metrics.summary import Problem, RunSummary
from crossover.records.model import RequestRecord
from crossover.records.store import Store
from crossover.spec.run import RunConfig
from crossover.sweep.actor import LOG_DIR_MARK, Item
from crossover.sweep.config import Level, SweepConfig, TargetConfig, ray_resources
from crossover.sweep.level import LevelResult
from crossover.workload import Prompt, prompt_of_row, prompt_row

#: the longest a node's actor holds finished records before relaying them (s)
RECORD_HOLD_S = 0.25
#: how long one ``take`` waits on the node for something to relay (s)
RELAY_WAIT_S = 0.25
#: how long the actor gets to cut a level short and stop its engine on Ctrl-C (s)
CANCEL_S = 20.0
#: how long the actor gets to stop its engine at the end of a target (s)
STOP_S = 60.0

_ADDRESS = re.compile(r"^(?:ray://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def parse_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port`` or ``ray://host:port``; ``None`` for ``auto``; a
    ``UsageError`` for anything else."""
    if address == "auto":
        return None
    m = _ADDRESS.match(address.strip())
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise UsageError(
            f"--ray {address!r}: expected auto, HOST:PORT (the head's GCS, e.g. "
            "10.0.0.5:6379) or ray://HOST:PORT (Ray Client, e.g. ray://head:10001)"
        )
    return m.group(1).strip("[]"), int(m.group(2))


class RayCluster:
    """A connection to an existing Ray cluster; ``close`` disconnects (the cluster stays)."""

    def __init__(self, address: str) -> None:
        self.address = address

    @classmethod
    def connect(cls, address: str) -> RayCluster:
        """Connect, or raise one ``UsageError`` line: a bad address, nothing answering
        there, Ray not installed."""
        where = parse_address(address)
        if where is not None:  # fail fast where ray.init would retry for a minute
            try:
                socket.create_connection(where, timeout=5.0).close()
            except OSError as exc:
                raise UsageError(
                    f"--ray {address}: nothing answers there ({exc.strerror or exc})"
                ) from None
        try:
            import ray
        except ImportError:
            raise UsageError(
                "--ray needs Ray on this machine and on the cluster's nodes: "
                "pip install 'crossover[ray]'"
            ) from None
        import logging

        try:
            ray.init(
                address=address,
                logging_level=logging.WARNING,
                log_to_driver=False,  # the engines' logs come back through the actors
                configure_logging=True,
            )
        except Exception as exc:  # ConnectionError, RuntimeError, gRPC errors: say which
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if where is None and "Could not find any running Ray instance" in first:
                # Ray's own words point at its flags (--address, RAY_ADDRESS)
                first = (
                    "no Ray cluster runs on this machine (crossover never starts one: "
                    "`ray start --head` does, and --ray HOST:PORT names another's head)"
                )
            raise UsageError(f"--ray {address}: cannot join the Ray cluster: {first}") from None
        return cls(address)

    def nodes(self) -> list[dict[str, Any]]:
        """The cluster's live nodes: ``{node_id, node_ip, resources}``."""
        import ray

        return [
            {
                "node_id": n["NodeID"],
                "node_ip": n["NodeManagerAddress"],
                "resources": n["Resources"],
            }
            for n in ray.nodes()  # type: ignore[no-untyped-call]
            if n.get("Alive")
        ]

    def check(self, config: SweepConfig, only: set[str] | None = None) -> None:
        """Refuse (one line) a target that no live node has room for: Ray would queue
        its actor forever."""
        nodes = self.nodes()
        for t in config.targets:
            if only is not None and t.name not in only:
                continue
            needs = ray_resources(t)
            if not any(all(n["resources"].get(k, 0) >= v for k, v in needs.items()) for n in nodes):
                want = ", ".join(f"{k}: {v:g}" for k, v in sorted(needs.items()))
                hint = " (resources: {GPU: 0} for an engine on CPU)" if "GPU" in needs else ""
                raise UsageError(
                    f"target {t.name} asks for {{{want}}} and no node of the Ray cluster at "
                    f"{self.address} has that{hint}"
                )

    def target(
        self,
        cfg: TargetConfig,
        sweep: SweepConfig,
        log_dir: Path,
        store: Store,
        on_engine: Any = None,
    ) -> RayTarget:
        return RayTarget(cfg, sweep, log_dir, store, on_engine)

    def close(self) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()


def _actor_class() -> Any:
    import ray

    from crossover.sweep.actor import TargetActor

    return ray.remote(TargetActor)


class RayTarget:
    """One target run by a ``TargetActor`` on a node of the cluster (``TargetRunner``)."""

    def __init__(
        self,
        cfg: TargetConfig,
        sweep: SweepConfig,
        log_dir: Path,
        store: Store,
        on_engine: Any = None,
        record_hold_s: float = RECORD_HOLD_S,
    ) -> None:
        needs = ray_resources(cfg)
        options: dict[str, Any] = {
            "num_cpus": needs.pop("CPU", 0.0),
            "num_gpus": needs.pop("GPU", 0.0),
            "resources": needs,
            "max_concurrency": 4,  # take() answers while a level runs
            "max_restarts": 0,  # a lost node fails the level; resume redoes it
        }
        self.cfg = cfg
        self.store = store
        self.log_dir = log_dir
        self.on_engine = on_engine
        self._info = TargetInfo(name=cfg.name)
        self._placement: dict[str, Any] | None = None
        self._progress: Progress | None = None
        self.actor = (
            _actor_class()
            .options(**options)
            .remote(sweep.model_dump_json(), cfg.name, record_hold_s)
        )

    @property
    def info(self) -> TargetInfo:
        return self._info

    # --- relaying -------------------------------------------------------------------
    def _apply(self, items: list[Item]) -> None:
        store = self.store
        for item in items:
            kind = item[0]
            if kind == "records":
                recs = [RequestRecord.model_validate_json(b) for b in item[2]]
                store.add_records(item[1], recs)
                if self._progress is not None:
                    for r in recs:
                        self._progress.update(r)
            elif kind == "create_run":
                store.create_run(item[1], item[2], item[3])
            elif kind == "sample":
                store.add_sample(item[1], item[2], item[3], item[4])
            elif kind == "finish":
                store.finish_run(item[1], item[2], item[3])
            elif kind == "engine":
                if self.on_engine is not None:
                    self.on_engine(self.cfg.name, item[1].replace(LOG_DIR_MARK, str(self.log_dir)))
            elif kind == "log":
                _, name, offset, data = item
                self.log_dir.mkdir(parents=True, exist_ok=True)
                if not offset:  # a new engine's log: an earlier one of that name is kept
                    keep_earlier_log(self.log_dir / name)
                with (self.log_dir / name).open("r+b" if offset else "wb") as fh:
                    fh.seek(offset)
                    fh.write(data)

    async def _call(self, method: str, *args: Any) -> Any:
        """Call an actor method, relaying its outbox until it returns; ``NodeLostError``
        when the actor (its node) is gone."""
        import ray

        main = asyncio.wrap_future(getattr(self.actor, method).remote(*args).future())
        try:
            while True:
                take = self.actor.take.remote(RELAY_WAIT_S)
                self._apply(await asyncio.wrap_future(take.future()))
                if main.done():
                    self._apply(await asyncio.wrap_future(self.actor.take.remote(0).future()))
                    return main.result()
        except ray.exceptions.RayActorError as exc:
            main.cancel()
            raise NodeLostError(self._lost_line(exc)) from None
        except asyncio.CancelledError:
            main.cancel()
            if self._placement is not None:  # placed: let it cut the level short first
                with contextlib.suppress(Exception):
                    cut = self.actor.cancel.remote()
                    cut_items = await asyncio.wait_for(asyncio.wrap_future(cut.future()), CANCEL_S)
                    self._apply(cut_items)
            # else it may still wait for room in Ray's queue: stop() ends it (an engine it
            # was starting dies with it)
            raise

    def _lost_line(self, exc: BaseException) -> str:
        p = self._placement or {}
        where = f"node {p.get('node_ip')} ({str(p.get('node_id'))[:12]})" if p else "its node"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return f"{self.cfg.name}'s Ray actor on {where} is gone (node died or left): {first}"

    @staticmethod
    def _raise_for(reply: Any) -> None:
        if isinstance(reply, dict) and "error" in reply:
            kind, message = reply["error"], reply["message"]
            if kind == "UsageError":
                raise UsageError(message)
            if kind in ("EngineError", "NodeLostError"):
                raise EngineError(message, reply.get("log_tail"))
            raise CrossoverError(message)

    # --- TargetRunner ---------------------------------------------------------------
    async def prepare(self, level: Level) -> RunConfig:
        reply = await self._call("prepare", level.key)
        self._raise_for(reply)
        self._info = TargetInfo.model_validate(reply["info"])
        self._placement = reply["placement"]
        return RunConfig.model_validate_json(reply["run_cfg"])

    async def build_prompts(self, run_cfg: RunConfig, count: int, first: int) -> list[Prompt]:
        reply = await self._call("build_prompts", run_cfg.model_dump_json(), count, first)
        self._raise_for(reply)
        return [prompt_of_row(p) for p in reply["prompts"]]

    async def measure(
        self, run_cfg: RunConfig, level: Level, *, run_id: str, key: str,
        prompts: list[Prompt], progress: Progress, drain: asyncio.Event | None = None,
    ) -> LevelResult:  # fmt: skip
        # ``drain`` is not relayed to the node: a Ray level runs whole
        job = {
            "run_cfg": run_cfg.model_dump_json(),
            "level": level.key,
            "run_id": run_id,
            "key": key,
            "prompts": [prompt_row(p) for p in prompts],
        }
        self._progress = progress
        try:
            reply = await self._call("measure", job)
        except NodeLostError as exc:
            return self._lost(run_cfg, run_id, key, str(exc))
        except asyncio.CancelledError:
            row = self.store.run(run_id)
            if row is not None and row.status == "running":
                self.store.finish_run(run_id, "interrupted", None)
            raise
        finally:
            self._progress = None
        self._raise_for(reply)
        if reply["status"] == "interrupted":
            raise asyncio.CancelledError
        summary = RunSummary.model_validate(reply["summary"])
        return LevelResult(run_id, reply["status"], summary, reply.get("reason"))

    def _lost(self, run_cfg: RunConfig, run_id: str, key: str, why: str) -> LevelResult:
        """The level whose node died: summarized from the records that reached the driver,
        failed with ``node_lost``."""
        store = self.store
        if store.run(run_id) is None:  # gone before the run began there
            ctx = make_context(run_cfg, None, self._info.version)
            store.create_run(
                run_id,
                {
                    "config": run_cfg.model_dump(mode="json"),
                    "context": ctx.model_dump(mode="json"),
                    "placement": self._placement or {"backend": "ray"},
                },
                key,
            )
        summary = resummarize(store, run_id)
        summary.problems.append(Problem(code="node_lost", severity="error", count=1, message=why))
        summary.verdict = "invalid"
        store.finish_run(run_id, "failed", summary.to_json_dict())
        return LevelResult(run_id, "failed", summary, why, target_lost=True)

    async def stop(self) -> None:
        """Stop the engine on its node, relay the rest of its logs, end the actor."""
        import ray

        if self._placement is not None:  # never placed: nothing to stop there
            with contextlib.suppress(Exception):
                ref = self.actor.stop.remote()
                self._apply(await asyncio.wait_for(asyncio.wrap_future(ref.future()), STOP_S))
        with contextlib.suppress(Exception):
            ray.kill(self.actor)
