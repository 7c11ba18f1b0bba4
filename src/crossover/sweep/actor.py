"""The node side of a sweep on a Ray cluster: one actor per target.

``TargetActor`` is placed by Ray where the target's resources are (``resources:``, GPUs
for a launched engine); it owns the target's engine (started, watched, restarted after a
death and stopped by the same ``TargetSession`` a local sweep uses) and runs the load
beside it, so the client is on the engine's node. Everything a level writes goes into an
outbox (``RelayStore``) instead of a database; the driver takes it out every fraction of
a second (``take``) and writes it into the one ``sweep.db``, so a node that dies loses
at most ``record_hold_s`` of its level's records, and that level is redone on resume.
New bytes of the engine logs travel the same way (``engines/`` on the driver).

The level's asyncio loop runs on one thread that lives as long as the actor process
(``lifelong_thread``): engines started from it get PR_SET_PDEATHSIG, so an actor that is
killed (``ray.kill``, Ctrl-C on the driver, the driver's death, a dead node's processes)
takes its engine with it. Ray's own threads only call in (``max_concurrency`` > 1), so
``take`` answers while a level runs. Nothing here imports Ray at module level.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from crossover.errors import CrossoverError
from crossover.load.rayworkers import actor_loop, drain, run_ray_workers
from crossover.measure import Progress, build_prompts, choose_tokenizer
from crossover.records.model import RequestRecord
from crossover.spec.run import RunConfig
from crossover.sweep.config import Level, SweepConfig
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler
from crossover.workload import Tokenizer, prompt_of_row, prompt_row

T = TypeVar("T")

#: the most log bytes one ``take`` carries per file (the rest comes with the next)
LOG_CHUNK = 1 << 20
#: marks the actor's log folder in messages; the driver puts its own engines/ there
LOG_DIR_MARK = "{engines}"

Item = tuple[Any, ...]


class RelayStore:
    """A ``RecordWriter`` that queues every write for the driver, in order."""

    def __init__(self, outbox: queue.SimpleQueue[Item]) -> None:
        self.outbox = outbox

    def create_run(self, run_id: str, context: dict[str, Any], key: str | None = None) -> None:
        self.outbox.put(("create_run", run_id, context, key))

    def add_record(self, run_id: str, record: RequestRecord) -> None:
        self.outbox.put(("records", run_id, [record.to_json()]))

    def add_records(self, run_id: str, records: Sequence[RequestRecord]) -> None:
        if records:
            self.outbox.put(("records", run_id, [r.to_json() for r in records]))

    def add_sample(self, run_id: str, source: str, t_s: float, data: dict[str, Any]) -> None:
        self.outbox.put(("sample", run_id, source, t_s, data))

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any] | None) -> None:
        self.outbox.put(("finish", run_id, status, summary))


def error_reply(exc: CrossoverError) -> dict[str, Any]:
    """A user-facing error as data: the driver raises the same kind again."""
    return {
        "error": type(exc).__name__,
        "message": str(exc),
        "log_tail": getattr(exc, "log_tail", None),
    }


async def _tracked(actor: TargetActor, coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` as the actor's level in flight (``cancel`` cuts it short). Not a method: a
    class with any ``async def`` is an asyncio actor to Ray, whose blocking methods would
    stop ``take`` from answering while a level runs."""
    actor._task = asyncio.current_task()
    try:
        return await coro
    finally:
        actor._task = None
        actor._level_over.set()


class TargetActor:
    """One target of a sweep on a Ray node (made a Ray actor by ``crossover.sweep.cluster``);
    every method is plain (blocking), so Ray runs it as a threaded actor."""

    def __init__(self, sweep_json: str, target: str, record_hold_s: float) -> None:
        import ray

        self.sweep = SweepConfig.model_validate_json(sweep_json)
        cfg = next(t for t in self.sweep.targets if t.name == target)
        self.record_hold_s = record_hold_s
        self.outbox: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self.logs = Path(tempfile.mkdtemp(prefix=f"crossover-{target}-"))
        self._log_sent: dict[str, int] = {}
        ctx = ray.get_runtime_context()
        self._placement = {
            "backend": "ray",
            "node_id": ctx.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
        }
        gpus = [str(g) for g in ray.get_gpu_ids()]
        mark = str(self.logs)

        def on_engine(name: str, message: str) -> None:
            self.outbox.put(("engine", message.replace(mark, LOG_DIR_MARK)))

        self.session = TargetSession(
            cfg, self.sweep, self.logs, NVMLSampler(), on_engine, visible_gpus=gpus or None
        )
        self.tokenizer: Tokenizer | None = None
        self._tokenizer_chosen = False
        self._task: asyncio.Task[Any] | None = None
        self._level_over = threading.Event()
        self._level_over.set()
        self.loop = actor_loop("crossover-actor-loop")

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the actor's loop thread and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    # --- what the driver calls ------------------------------------------------------
    def placement(self) -> dict[str, Any]:
        return dict(self._placement)

    def prepare(self, level_key: str) -> dict[str, Any]:
        """The engine up (started here, on this node) and the level's run config."""
        try:
            run_cfg = self._run(self.session.prepare(Level.from_key(level_key)))
        except CrossoverError as exc:
            return error_reply(exc)
        return {
            "run_cfg": run_cfg.model_dump_json(),
            "info": self.session.info.model_dump(mode="json"),
            "placement": self.placement(),
        }

    def _choose_tokenizer(self, run_cfg: RunConfig) -> Tokenizer | None:
        # chosen once per actor: the target's own (the config's, or its engine's /tokenize)
        if not self._tokenizer_chosen:
            self.tokenizer = choose_tokenizer(run_cfg)
            self._tokenizer_chosen = True
        return self.tokenizer

    def build_prompts(self, run_cfg_json: str, count: int, first: int) -> dict[str, Any]:
        run_cfg = RunConfig.model_validate_json(run_cfg_json)
        try:
            tokenizer = self._choose_tokenizer(run_cfg)
            prompts = build_prompts(run_cfg, tokenizer, count, first=first)
        except CrossoverError as exc:
            return error_reply(exc)
        return {"prompts": [prompt_row(p) for p in prompts]}

    def measure(self, job: dict[str, Any]) -> dict[str, Any]:
        """One level; its writes go to the outbox as they happen, the result is returned."""
        run_cfg = RunConfig.model_validate_json(job["run_cfg"])
        prompts = [prompt_of_row(p) for p in job["prompts"]]
        try:
            tokenizer = self._choose_tokenizer(run_cfg)
        except CrossoverError:
            tokenizer = None
        coro = self.session.measure(
            run_cfg,
            Level.from_key(job["level"]),
            RelayStore(self.outbox),
            run_id=job["run_id"],
            key=job["key"],
            prompts=prompts,
            progress=Progress(total=run_cfg.requests),
            tokenizer=tokenizer,
            placement=self.placement(),
            record_hold_s=self.record_hold_s,
            workers_runner=run_ray_workers if run_cfg.workers > 1 else None,
        )
        self._level_over.clear()
        try:
            result = self._run(_tracked(self, coro))
        except concurrent.futures.CancelledError:
            return {"status": "interrupted"}
        except CrossoverError as exc:
            return error_reply(exc)
        return {
            "status": result.status,
            "summary": result.summary.to_json_dict(),
            "reason": result.reason,
        }

    def take(self, wait_s: float) -> list[Item]:
        """What the level wrote since the last call (waiting up to ``wait_s`` for the first
        item), then any new engine-log bytes."""
        return drain(self.outbox, wait_s) + self._log_items()

    def _log_items(self) -> list[Item]:
        out: list[Item] = []
        for path in sorted(self.logs.glob("*.log")):
            sent = self._log_sent.get(path.name, 0)
            try:
                with path.open("rb") as fh:
                    fh.seek(sent)
                    data = fh.read(LOG_CHUNK)
            except OSError:
                continue
            if data:
                out.append(("log", path.name, sent, data))
                self._log_sent[path.name] = sent + len(data)
        return out

    def cancel(self) -> list[Item]:
        """Ctrl-C on the driver: cut the level short (its run marked interrupted, every
        record received written first) and stop the engine; what is left to relay."""
        task = self._task
        if task is not None:
            self.loop.call_soon_threadsafe(task.cancel)
            self._level_over.wait(10.0)
        return self.stop()

    def stop(self) -> list[Item]:
        """Stop the engine (all replicas); the rest of the outbox and of the logs."""
        with contextlib.suppress(Exception):
            self._run(self.session.stop())
        items = self.take(0)
        while True:  # a long log comes in several chunks
            more = self._log_items()
            if not more:
                break
            items += more
        shutil.rmtree(self.logs, ignore_errors=True)  # every byte is on its way to the driver
        self._log_sent.clear()
        return items
