"""Run a sweep: every target over every level and repeat, resumably.

Targets run one after another (one engine at a time, so one GPU is enough); with a Ray
cluster (``--ray``) each target is an actor on a node with its resources and they run
side by side (``crossover.sweep.cluster``). Either way one level is measured by the same
code (``crossover.sweep.level``), and each launched engine is started once and reused
across its levels (with ``restart_between_repeats``, once per repeat: stopped after its
last level of a repeat and started again for the next, so the repeats' spread holds the
start-to-start variation). Every run is
committed to ``DIR/sweep.db`` as it finishes and ``DIR/sweep.json`` is rewritten
after each, so an interrupted sweep loses at most the level in flight; the same
command again skips the runs already done (each has a key target|level|repeat, the level
``c=4`` for a concurrency or ``rate=2.5`` for an arrival rate in a rate sweep).
An engine that dies mid-level fails that level, is restarted, and the sweep goes on.
With ``refine``, levels are added between the measured ones where a crossover's interval
is still wide; inconclusive brackets get only the budget the crossovers leave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crossover import defaults
from crossover.analysis import (
    SweepFile,
    SweepRun,
    TargetInfo,
    propose_refinement,
    reanalyze,
)
from crossover.analysis.crossovers import Finding
from crossover.analysis.schema import (
    EngineStart,
    GpuSample,
    Placement,
    RooflineFacts,
    RunPart,
    ServerMetricsSample,
)
from crossover.errors import (
    EngineError,
    EngineVersionChangedError,
    NodeLostError,
    TargetUnreachableError,
    UsageError,
)
from crossover.measure import Progress, build_prompts, choose_tokenizer, new_run_id
from crossover.measure.host import kept_hosts, note_host, read_host
from crossover.metrics.host import HostFacts
from crossover.metrics.summary import RunSummary
from crossover.records.folder_lock import FolderLock
from crossover.records.model import RequestRecord
from crossover.records.store import RunRow, Store
from crossover.spec.run import RunConfig
from crossover.sweep.check import check_replica_gpus
from crossover.sweep.config import (
    Level,
    SweepConfig,
    TargetConfig,
    runs_at,
    settings_refusal,
    way_out,
)
from crossover.sweep.level import LOCAL_PLACEMENT, LevelResult, TargetSession
from crossover.sweep.scrape import NVMLSampler
from crossover.sweep.versions import run_version, same_version
from crossover.words import plural
from crossover.workload import Prompt, Tokenizer, prompt_of_row, prompt_row
from crossover.workload.tokenizers import ServerTokenizer

if TYPE_CHECKING:
    from crossover.sweep.cluster import RayCluster


def repeat_arrival_seed(seed: int, repeat: int) -> int:
    """The arrival seed of an open-loop repeat: repeat 0 keeps the prompts' seed (the
    arrivals a sweep drew before repeats had their own), later repeats a seed apart."""
    return seed + ARRIVAL_SEED_STRIDE * repeat


#: how far apart the repeats' arrival seeds are: beyond any seed a sweep is given by hand
ARRIVAL_SEED_STRIDE = 1_000_003


def interleaved_order(
    todo: list[tuple[str, list[tuple[Level, int]]]],
) -> list[tuple[str, Level, int]]:
    """The runs of every target, by repeat, then level, then target: the targets in
    their order at even repeats and reversed at odd ones, so neither always goes first."""
    keys: dict[tuple[int, Level], list[str]] = {}
    for name, runs in todo:
        for level, r in runs:
            keys.setdefault((r, level), []).append(name)
    out = []
    repeats = sorted({r for r, _ in keys})
    for r in repeats:
        for (rep, level), names in keys.items():
            if rep != r:
                continue
            for name in names if r % 2 == 0 else reversed(names):
                out.append((name, level, r))
    return out


#: a level stopped on purpose before its planned requests (``crossover decide``): the
#: ``samples`` source holding the requests planned and why it stopped
SEQUENTIAL_STOP = "sequential_stop"
#: sees each record of a level as it arrives; a reason (str) stops the level there
LevelWatch = Callable[[RequestRecord], str | None]


def _resumed_on(host: HostFacts, before: HostFacts) -> str:
    """The line a sweep prints where it resumed on ``host``, another machine than
    ``before``, the last one it ran on: another kind, or another machine of the same kind
    (their ``machine_id`` differs)."""
    if before.same_kind(host):
        return (
            f"this sweep resumed on another machine of the same kind: {host.describe()} "
            f"(machine {host.machine_id}); its runs so far were measured on the other "
            f"(machine {before.machine_id}; sweep.json's hosts keeps both: compare "
            "across them as two machines, not as repeats)"
        )
    return (
        f"this sweep resumed on another machine: {host.describe()}; its runs so far were "
        f"measured on {before.describe()} (sweep.json's hosts keeps both: compare their "
        "runs as two machines, not as repeats)"
    )


def run_key(target: str, level: Level, repeat: int) -> str:
    return f"{target}|{level.key}|r={repeat}"


#: the status of a run ``--redo NAME`` under changed settings set aside (``_set_aside``)
SET_ASIDE = "set_aside"

#: a run's place in a sweep: target, axis, level, repeat
RunPlace = tuple[str, str, float, int]


def finished_rows(store: Store) -> dict[RunPlace, RunRow]:
    """The stored run sweep.json takes for each place: one that finished (done or
    failed) with a summary, the latest per place (a run repeated after a failure, or
    measured again, replaces the earlier)."""
    out: dict[RunPlace, RunRow] = {}
    for row in store.runs():  # oldest first: a later one replaces it
        if row.key is None or row.summary is None or row.status not in ("done", "failed"):
            continue
        name, level, repeat = parse_run_key(row.key)
        out[(name, level.axis, level.value, repeat)] = row
    return out


def held_axes(store: Store) -> set[str]:
    """The axes (concurrency, rate) of the runs ``store`` holds finished."""
    return {axis for _, axis, _, _ in finished_rows(store)}


def held_settings(store: Store) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Each target's settings (``SweepConfig.target_settings``) as its valid runs that
    sweep.json takes were measured with: by target, each run's place (``c=4 r=0``) and
    settings. A run that did not verify is never a point of the analysis (and
    ``--redo-invalid`` measures it again), one stored before the settings were kept
    holds none: neither is listed."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name, row in valid_finished(store):
        settings = row.context.get("target_settings")
        if isinstance(settings, dict):
            out.setdefault(name, []).append((run_place(row.key or ""), settings))
    return out


def held_versions(store: Store) -> dict[str, dict[str, list[str]]]:
    """Each target's engine versions as its valid runs that sweep.json takes were
    measured with: by target, each version and the places (``c=4 r=0``) of its runs. A
    run whose engine said no version (a URL target's, a probe that did not answer) is
    not listed."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, row in valid_finished(store):
        version = run_version(row)
        if version is not None:
            out.setdefault(name, {}).setdefault(version, []).append(run_place(row.key or ""))
    return out


def valid_finished(store: Store) -> Iterator[tuple[str, RunRow]]:
    """``(target, row)`` of each finished run that verified: the runs sweep.json takes."""
    for (name, _, _, _), row in finished_rows(store).items():
        if (row.summary or {}).get("verdict") == "valid":
            yield name, row


def run_place(key: str) -> str:
    """A run key's place, as messages name it: ``c=4 r=0``."""
    return " ".join(key.split("|")[1:])


def parse_run_key(key: str) -> tuple[str, Level, int]:
    """``(target, level, repeat)`` of a run key, old (``A|c=4|r=0``) or new."""
    name, level, rep = key.split("|")
    return name, Level.from_key(level), int(rep.removeprefix("r="))


@dataclass
class SweepEvents:
    """Hooks for the CLI's progress display; all optional."""

    on_level_start: Callable[[str, Level, int, Progress], None] | None = None
    on_level_done: Callable[[str, Level, int, RunSummary, str], None] | None = None
    on_skip: Callable[[str, Level, int], None] | None = None
    on_engine: Callable[[str, str], None] | None = None
    #: ``--refine`` adds levels: the levels and the extra levels its budget has left
    on_refine: Callable[[list[int], int], None] | None = None
    #: a line the user should read before the levels (the sweep resumed on another machine)
    on_note: Callable[[str], None] | None = None


class TargetRunner(Protocol):
    """Runs one target's levels: here (``LocalTarget``) or on a Ray node
    (``crossover.sweep.cluster.RayTarget``); the sweep runner plans, hands out the
    prompts and keeps the sweep file either way."""

    @property
    def info(self) -> TargetInfo:
        """The target as last launched (engine, version, effective settings)."""

    async def prepare(self, level: Level) -> RunConfig:
        """The engine up and the level's run config."""

    async def build_prompts(self, run_cfg: RunConfig, count: int, first: int) -> list[Prompt]:
        """Prompts ``first`` .. ``first + count - 1``, counted with the target's tokenizer."""

    async def measure(
        self, run_cfg: RunConfig, level: Level, *, run_id: str, key: str,
        prompts: list[Prompt], progress: Progress, drain: asyncio.Event | None = None,
    ) -> LevelResult:  # fmt: skip
        """One level, its records and run in the sweep's database; ``drain`` set, the
        level sends nothing more and ends when its requests in flight have (here only:
        a Ray node's level runs whole)."""

    async def stop(self) -> None:
        """Stop the target's engine (and, on Ray, its actor)."""


class LocalTarget:
    """A target run in this process: its engine a child of the sweep, its records
    straight into the sweep's database."""

    def __init__(self, session: TargetSession, runner: SweepRunner) -> None:
        self.session = session
        self.runner = runner

    @property
    def info(self) -> TargetInfo:
        return self.session.info

    async def prepare(self, level: Level) -> RunConfig:
        return await self.session.prepare(level)

    def _tokenizer_for(self, run_cfg: RunConfig) -> Tokenizer | None:
        # one tokenizer for the whole sweep, chosen by the first target that asks: for its
        # prompts or, in a resumed sweep whose prompts are all stored, for its records
        # (without it no text is kept and the re-tokenized witness is never asked)
        runner = self.runner
        if not runner._tokenizer_chosen:
            runner._tokenizer = choose_tokenizer(run_cfg)
            runner._tokenizer_chosen = True
        chosen = runner._tokenizer
        if isinstance(chosen, ServerTokenizer) and chosen.base_url != run_cfg.url.rstrip("/"):
            # an engine's own /tokenize: the engine that answered it first is stopped once
            # the sweep moves to the next target (one GPU), and its tokenizer with it; each
            # launched target's text is re-tokenized by its own engine instead
            own = runner._server_tokenizers.get(run_cfg.url)
            if own is None and run_cfg.url not in runner._server_tokenizers:
                found = choose_tokenizer(run_cfg)
                own = found if isinstance(found, ServerTokenizer) else None
                runner._server_tokenizers[run_cfg.url] = own
            return own or chosen
        return chosen

    async def build_prompts(self, run_cfg: RunConfig, count: int, first: int) -> list[Prompt]:
        return build_prompts(run_cfg, self._tokenizer_for(run_cfg), count, first=first)

    async def measure(
        self, run_cfg: RunConfig, level: Level, *, run_id: str, key: str,
        prompts: list[Prompt], progress: Progress, drain: asyncio.Event | None = None,
    ) -> LevelResult:  # fmt: skip
        tokenizer = self._tokenizer_for(run_cfg)
        return await self.session.measure(
            run_cfg, level, self.runner.store, run_id=run_id, key=key, prompts=prompts,
            progress=progress, tokenizer=tokenizer, placement=LOCAL_PLACEMENT, drain=drain,
        )  # fmt: skip

    async def stop(self) -> None:
        await self.session.stop()


@dataclass
class _Target:
    cfg: TargetConfig
    info: TargetInfo
    #: the local session (engine state kept across refine passes); None with Ray
    session: TargetSession | None = None


@dataclass
class SweepOutcome:
    sweep: SweepFile
    findings: list[Finding]
    ran: int
    skipped: int
    failed_levels: list[str] = field(default_factory=list)
    #: targets that measured nothing as their engine started at another version than
    #: their kept runs' (``--redo NAME`` measures them again; the same command would not)
    version_refused: list[str] = field(default_factory=list)
    #: under ``--only``: the stored runs of each target it left out, which sweep.json and
    #: the table hold as before (``{}`` without ``--only``)
    left_out: dict[str, int] = field(default_factory=dict)


class SweepRunner:
    def __init__(
        self,
        config: SweepConfig,
        out: Path,
        events: SweepEvents | None = None,
        only: set[str] | None = None,
        redo_invalid: bool = False,
        cluster: RayCluster | None = None,
        redo: dict[str, set[float] | None] | None = None,
        tie_rel: float | None = None,
        command: str = "sweep",
    ) -> None:
        self.config = config
        #: on resume, measure again the levels whose stored run is not valid
        self.redo_invalid = redo_invalid
        #: on resume, measure again these targets' levels (None: all of the target's),
        #: every repeat, valid or not (``--redo NAME@LEVEL``: an outlier repeat)
        self.redo = redo or {}
        #: measure only these targets this time; the others' stored runs stay in sweep.json
        self.only = only
        config.check_only(only)
        from crossover.metrics.client_floor import resolve_client_floor

        # a bad floor file fails before work, and before sweep.db exists
        resolve_client_floor(config.client_floor, None)
        if (out / "sweep.json").is_dir():  # written after each level: a traceback there
            raise UsageError(f"{out / 'sweep.json'} is a folder; the sweep writes its file there")
        #: with a Ray cluster every target runs on a node of it (``crossover.sweep.cluster``),
        #: the targets in parallel as far as the cluster has room
        self.cluster = cluster
        if cluster is None:  # on a cluster Ray gives each target's actor its GPUs
            picked = [t for t in config.targets if only is None or t.name in only]
            check_replica_gpus(picked)
        self.out = out
        self.events = events or SweepEvents()
        # one writer per folder, before anything in it is opened or changed: a second
        # sweep or decide there is refused with one line naming the first (``command``)
        self.lock = FolderLock.take(out, command)
        #: the command measuring (sweep or decide): decide has no --redo to offer
        self.command = command
        #: targets under ``--redo NAME`` whose kept runs were measured with other
        #: settings: only those runs are measured again (``_check_resume``)
        self._settings_redo: set[str] = set()
        #: each target's engine versions its kept valid runs were measured with (a
        #: target under --redo NAME left out: every level of it is measured again)
        self._held_versions: dict[str, dict[str, list[str]]] = {}
        #: the targets under --redo NAME (every level of it)
        self._whole_redo: set[str] = set()
        #: the version each target's engine first started at in this command
        self._started: dict[str, str] = {}
        #: targets under --redo NAME measuring again, once their engine has started, only
        #: the kept runs measured otherwise (other settings, another engine version): the
        #: version it started at (None: not known, settings alone)
        self._redoing: dict[str, str | None] = {}
        self.version_refused: list[str] = []
        try:
            self.store = Store(out / "sweep.db")
        except BaseException:
            self.lock.release()
            raise
        self.nvml = NVMLSampler()
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_chosen = False
        #: each target's own engine tokenizer by URL, where the sweep's is an engine's
        #: (``None``: that engine has none)
        self._server_tokenizers: dict[str, ServerTokenizer | None] = {}
        self._prompts: list[Prompt] | None = None
        self._prompts_lock = asyncio.Lock()
        self.targets = [_Target(t, TargetInfo(name=t.name)) for t in config.targets]
        self.ran = 0
        self.skipped = 0
        self.failed_levels: list[str] = []
        #: targets whose engine ``measure_level`` left up, by name
        self._open: dict[str, TargetRunner] = {}
        #: engine starts noted in this process, and each target's start still up (its
        #: index in the ``engine_starts`` meta list, to stamp its stop on)
        self._starts_seen: set[tuple[str, str, float, str | None]] = set()
        self._start_up: dict[str, int] = {}
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            self._check_resume()
            #: the tie margin the analysis reads every level with (``--tie-margin``: means
            #: within it of each other are level), also behind ``--refine``'s levels; kept
            #: in the database, so a resume without one reads as the sweep was read before
            if tie_rel is not None:
                self.store.set_meta("tie_margin", tie_rel)
            stored = self.store.get_meta("tie_margin")
            self.tie_rel: float = float(stored) if stored else 0.0
        except BaseException:  # refused (another workload there): the folder goes free
            self.close()
            raise

    # --- resumption -------------------------------------------------------
    def _check_resume(self) -> None:
        differ = self.config.identity_differs(
            self.store.get_meta("identity"), held_axes(self.store)
        )
        if differ:
            raise UsageError(
                f"{self.out} holds a sweep with a different workload ({', '.join(differ)}); "
                "use another --out or the same settings to resume"
            )
        # a target with runs kept is measured on only with the settings they were; under
        # --redo NAME (all its levels) the runs measured otherwise are measured again
        held = held_settings(self.store)
        whole = {n for n, levels in self.redo.items() if levels is None}
        picked = {n for n in held if self.only is None or n in self.only}
        changed = self.config.settings_differ(held, picked)
        self._settings_redo = set(changed) & whole
        # the engine's version is known once it has started: compared then (_level)
        self._held_versions = held_versions(self.store)
        self._whole_redo = whole
        refused = {n: d for n, d in changed.items() if n not in whole}
        if refused:
            raise UsageError(settings_refusal(self.out, refused, self.command))
        for name in sorted(self._settings_redo):
            self._set_aside(name)
        self.store.set_meta("identity", self.config.identity())
        started = self.store.get_meta("started_at")
        if started:
            self.started_at = started
        else:
            self.store.set_meta("started_at", self.started_at)
        # the machine it runs on now (the GPUs its targets' engines may use), kept where
        # it is another kind than the last one, or another machine of the same kind
        stored = self.store.get_meta("hosts") or []
        host = read_host(devices=[t.engine_gpus for t in self.config.targets])
        hosts, before = note_host(stored, host)
        if hosts is not stored:
            self.store.set_meta("hosts", hosts)
        if before is not None and self.events.on_note is not None:
            self.events.on_note(_resumed_on(host, before))

    def _set_aside(
        self,
        name: str,
        otherwise: Callable[[RunRow], bool] | None = None,
        what: str = "other settings",
    ) -> None:
        """Under ``--redo NAME`` with changed settings (or, ``otherwise`` given, another
        engine version: ``what``): NAME's finished runs measured otherwise at places this
        command does not measure again (a level ``--refine`` added, one the config no
        longer has, a repeat past its count) are set aside: kept in sweep.db with their
        records, status ``set_aside``, no longer points of sweep.json, so no level mixes
        two settings. Said in a note."""
        t = self.config.target_named(name)
        planned = {(lv.axis, lv.value) for lv in self.config.levels_of(t)}
        aside: list[tuple[float, int, str]] = []
        for row in self.store.runs():
            if row.key is None or row.status not in ("done", "failed"):
                continue
            who, level, r = parse_run_key(row.key)
            if who != name or ((level.axis, level.value) in planned and r < self.config.repeats):
                continue
            if otherwise is not None:
                if not otherwise(row):
                    continue
            elif self.config.same_settings(
                t, run_place(row.key), row.context.get("target_settings")
            ):
                continue
            self.store.finish_run(row.run_id, SET_ASIDE, row.summary)
            aside.append((level.value, r, run_place(row.key)))
        if aside and self.events.on_note is not None:
            shown = ", ".join(dict.fromkeys(place for _, _, place in sorted(aside)))
            self.events.on_note(
                f"{name}: {plural(len(aside), 'run')} measured with {what} outside "
                f"the levels and repeats this command measures ({shown}) set aside: kept in "
                "sweep.db, no longer points of sweep.json"
            )

    def _done(self, target: str, level: Level, r: int) -> bool:
        row = self.store.finished_by_key(run_key(target, level, r))
        if row is None:
            return False
        if target in self._settings_redo:
            # measured again only where the settings changed: a redo cut short resumes
            t = self.config.target_named(target)
            place = run_place(row.key or "")
            if not self.config.same_settings(t, place, row.context.get("target_settings")):
                return False
        elif target in self.redo:
            levels = self.redo[target]
            if levels is None or level.value in levels:
                return False
        # with redo_invalid a run that did not verify is measured again (it stays stored)
        return not (self.redo_invalid and (row.summary or {}).get("verdict") != "valid")

    # --- prompts ----------------------------------------------------------
    def _warmup(self, level: Level) -> int:
        return self.config.warmup_for(level.concurrency, "level")

    def _slice_length(self, level: Level) -> int:
        cfg = self.config
        measured = cfg.requests_for_level(level)
        if measured is None and level.concurrency is not None:
            measured = defaults.timed_prompts(level.concurrency)
        elif measured is None:  # as many as the open loop schedules for the duration
            measured = int(level.value * (cfg.duration_s_per_level or 0) * 1.5) + 16
        return measured + self._warmup(level)

    def _next_slice(self, slices: dict[str, list[int]]) -> int:
        """Where the next slice starts: after the last, at a session's first turn (a
        slice's request i must be turn i mod T, as its run sends it)."""
        end = max((a + n for a, n in slices.values()), default=0)
        turns = self.config.sessions.turns if self.config.sessions else 1
        return -(-end // turns) * turns

    @staticmethod
    def _slice_key(level: Level, r: int) -> str:
        # concurrency levels keep the key sweeps always stored
        return f"{level.concurrency}|{r}" if level.concurrency is not None else f"{level.key}|{r}"

    async def _prompts_for(
        self, level: Level, r: int, build: Callable[[int, int], Awaitable[list[Prompt]]]
    ) -> list[Prompt]:
        """Prompts of level ``c``, repeat ``r``: the same for every target, and distinct
        from every other level's and repeat's, so no run gets prefix-cache hits from an
        earlier one (llama.cpp caches each slot's last prompt). Slices and prompts are
        kept in the database, so a resumed sweep sends exactly the same ones. ``build(count,
        first)`` makes missing ones (with the tokenizer of the target asking, on its node)."""
        async with self._prompts_lock:  # targets running in parallel share one list
            slices: dict[str, list[int]] = self.store.get_meta("prompt_slices") or {}
            if not slices:  # the whole base plan at once: one tokenizer fits all of it
                for lvl in self.config.levels():
                    for rep in range(self.config.repeats):
                        start = self._next_slice(slices)
                        slices[self._slice_key(lvl, rep)] = [start, self._slice_length(lvl)]
            if self._slice_key(level, r) not in slices:  # a level added by --refine
                start = self._next_slice(slices)
                slices[self._slice_key(level, r)] = [start, self._slice_length(level)]
            self.store.set_meta("prompt_slices", slices)
            need = max(a + n for a, n in slices.values())
            if self._prompts is None:
                stored = self.store.get_meta("prompts") or []
                self._prompts = [prompt_of_row(p) for p in stored]
            if len(self._prompts) < need:
                have = len(self._prompts)
                self._prompts += await build(need - have, have)
                self.store.set_meta(
                    "prompts",
                    [prompt_row(p) for p in self._prompts],
                )
            start, length = slices[self._slice_key(level, r)]
            return self._prompts[start : start + length]

    # --- one level --------------------------------------------------------
    async def _level(
        self, t: _Target, backend: TargetRunner, level: Level, r: int,
        watch: LevelWatch | None = None,
    ) -> bool:  # fmt: skip
        """Measure one level; False when the target cannot go on (its Ray node is gone).
        ``watch`` sees every record as it arrives; once it gives a reason the level sends
        nothing more (its requests in flight finish) and the reason is kept with the run
        (a ``sequential_stop`` sample: the requests planned and why it stopped)."""
        name = t.cfg.name
        before = t.info  # what sweep.json keeps of it, should this start be refused
        try:
            run_cfg = await backend.prepare(level)
        except NodeLostError as exc:
            self.failed_levels.append(f"{name} {level.label} r={r}: {exc}")
            return False
        except TargetUnreachableError as exc:
            self.failed_levels.append(f"{name} {level.label} r={r}: {exc}")
            raise
        except EngineError as exc:
            said = f" (its log ends: {exc.cause})" if exc.cause else ""
            self.failed_levels.append(f"{name} {level.label}: engine failed to start: {exc}{said}")
            raise
        finally:
            t.info = backend.info
            self._note_start(t)
        refused = self._on_version(name, t.info.version, launched=t.cfg.launch is not None)
        if refused is not None:
            # its points stay those of the version they were measured with: so does the
            # version sweep.json and the report name (this start's is in the line)
            t.info = before
            self.failed_levels.append(f"{name} {level.label} r={r}: not measured: {refused}")
            self.version_refused.append(name)
            raise EngineVersionChangedError(refused)
        if self._kept_as_now(name, level, r):  # a redo's run measured so already
            self.skipped += 1
            if self.events.on_skip:
                self.events.on_skip(name, level, r)
            return True
        if run_cfg.mode == "rate" and run_cfg.trace is None:
            # each repeat its own arrivals (recorded in its summary), so the repeats'
            # spread holds the arrivals' noise; every target gets the same ones
            run_cfg = run_cfg.model_copy(
                update={"arrival_seed": repeat_arrival_seed(run_cfg.seed, r)}
            )

        async def build(count: int, first: int) -> list[Prompt]:
            return await backend.build_prompts(run_cfg, count, first)

        prompts = await self._prompts_for(level, r, build)
        progress = Progress(total=run_cfg.requests)
        run_id = new_run_id()
        drain: asyncio.Event | None = None
        if watch is not None:
            drain = asyncio.Event()
            stop = drain

            def listen(rec: RequestRecord) -> None:
                if stop.is_set():
                    return
                why = watch(rec)
                if why is not None:
                    stop.set()
                    self.store.add_sample(
                        run_id, SEQUENTIAL_STOP, 0.0,
                        {"planned": run_cfg.requests, "why": why},
                    )  # fmt: skip

            progress.listener = listen
        if self.events.on_level_start:
            self.events.on_level_start(name, level, r, progress)
        result = await backend.measure(
            run_cfg, level, run_id=run_id, key=run_key(name, level, r), prompts=prompts,
            progress=progress, drain=drain,
        )  # fmt: skip
        self.ran += 1
        if result.status == "failed":
            self.failed_levels.append(f"{name} {level.label} r={r}: {result.reason or ''}")
        if self.events.on_level_done:
            self.events.on_level_done(name, level, r, result.summary, result.status)
        self.write_sweep_file()
        return not result.target_lost

    def _backend(self, t: _Target) -> TargetRunner:
        if self.cluster is not None:
            return self.cluster.target(
                t.cfg, self.config, self.out / "engines", self.store, self.events.on_engine
            )
        if t.session is None:
            t.session = TargetSession(
                t.cfg, self.config, self.out / "engines", self.nvml, self.events.on_engine
            )
        return LocalTarget(t.session, self)

    def _on_version(self, name: str, version: str | None, launched: bool = True) -> str | None:
        """Target ``name``'s engine has started at ``version``: why it may not measure
        here (``None`` when it may). Its kept valid runs were measured with another
        version, and a level would mix the two, as a changed setting would
        (``_check_resume``); or it started at another earlier in this command. Under
        ``--redo NAME`` the runs of another version are measured again instead: those at
        places this command does not measure are set aside (``_set_aside``), and from
        then on a kept run measured as now is not measured again (``_kept_as_now``), so
        a redo cut short resumes. A version not known is not compared."""
        if version is None:
            if name in self._settings_redo:
                self._redoing.setdefault(name, None)
            return None
        again = way_out(self.out, [name], self.command, " under this one")
        # a URL target's server was not started here: it answers a version
        now = f"it started at {version}" if launched else f"its server answers {version} now"
        first = self._started.setdefault(name, version)
        if not same_version(first, version):
            return (
                f"{name}'s engine was at {first} earlier in this command and {now}: a level "
                f"would mix two versions; use the version it was at{again}"
            )
        held = self._held_versions.get(name) or {}
        other = {v: places for v, places in held.items() if not same_version(v, version)}
        if name in self._whole_redo:
            if name not in self._redoing or self._redoing[name] is None:
                if other or name in self._settings_redo:
                    self._redoing[name] = version
                if other:
                    self._set_aside(
                        name,
                        lambda row: not same_version(run_version(row) or version, version),
                        "another engine version",
                    )
            return None
        if not other:
            return None
        places = [p for ps in other.values() for p in ps]
        n = sum(len(ps) for ps in held.values())
        at = "" if len(places) == n else f" ({runs_at(places, n)})"
        return (
            f"{self.out} holds runs of {name} measured with its engine at "
            f"{' or '.join(other)}{at}, and {now}: a level would mix two versions; use "
            f"another --out, the version they were measured with{again}"
        )

    def _kept_as_now(self, name: str, level: Level, r: int) -> bool:
        """Under ``--redo NAME`` once its engine has started (``_redoing``): whether the
        kept run at ``level``, repeat ``r``, was measured as now (the same settings, the
        same version where both are known), so it is not measured again."""
        if name not in self._redoing:
            return False
        row = self.store.finished_by_key(run_key(name, level, r))
        if row is None:
            return False
        if self.redo_invalid and (row.summary or {}).get("verdict") != "valid":
            return False  # --redo-invalid measures it again
        t = self.config.target_named(name)
        if not self.config.same_settings(
            t, run_place(row.key or ""), row.context.get("target_settings")
        ):
            return False
        now, then = self._redoing[name], run_version(row)
        return now is None or then is None or same_version(then, now)

    async def _run_target(self, t: _Target, todo: list[tuple[Level, int]]) -> None:
        if not todo:
            return
        backend = self._backend(t)
        try:
            for i, (c, r) in enumerate(todo):
                if i and r != todo[i - 1][1] and self.config.restart_between_repeats:
                    # each repeat its own engine start: stopped after the last level of
                    # one repeat, started (and warmed up) again at the next repeat's first
                    await self._stop(t.cfg.name, backend)
                    self._say_restart(t.cfg.name, todo[i - 1][1], r)
                    backend = self._backend(t)
                try:
                    going = await self._level(t, backend, c, r)
                except EngineError as exc:
                    # the engine would not start (or its URL stopped answering): the rest
                    # of this target cannot run now; the other targets still do
                    left = ", ".join(f"{lv.label} r={rep}" for lv, rep in todo[i + 1 :])
                    if left and isinstance(exc, TargetUnreachableError | EngineVersionChangedError):
                        self.failed_levels.append(
                            f"{t.cfg.name}: not run, {exc.left_reason}: {left}"
                        )
                    break
                if not going:
                    left = ", ".join(f"{lv.label} r={rep}" for lv, rep in todo[i + 1 :])
                    if left:
                        self.failed_levels.append(
                            f"{t.cfg.name}: not run, its node is gone (resume runs them): {left}"
                        )
                    break
        finally:
            await self._stop(t.cfg.name, backend)

    async def _run_interleaved(self, plans: list[tuple[_Target, list[tuple[Level, int]]]]) -> None:
        """``interleave``: every target's engine up together, and each level's repeat
        measured target after target before the next (A, B at repeat 0; B, A at repeat 1;
        ...), so a load that drifts on a shared machine moves every target alike instead of
        deciding the comparison (measured one target after the other, a 2-core machine's
        drift made, then unmade, a crossover). A target that cannot go on drops out; the
        others continue."""
        order = interleaved_order([(t.cfg.name, todo) for t, todo in plans])
        by_name = {t.cfg.name: t for t, _ in plans}
        backends: dict[str, TargetRunner] = {}
        gone: set[str] = set()
        try:
            for i, (name, level, r) in enumerate(order):
                if i and r != order[i - 1][2] and self.config.restart_between_repeats:
                    # each repeat its own engine starts: every engine up is stopped after
                    # a repeat, and each starts again at its first level of the next
                    for up, b in list(backends.items()):
                        if up not in gone:
                            await self._stop(up, b)
                            if any(n == up for n, _, _ in order[i:]):
                                self._say_restart(up, order[i - 1][2], r)
                    backends.clear()
                if name in gone:
                    continue
                t = by_name[name]
                backend = backends.get(name)
                if backend is None:
                    backend = backends[name] = self._backend(t)
                try:
                    going = await self._level(t, backend, level, r)
                except EngineError as exc:
                    going = False
                    left = ", ".join(
                        f"{lv.label} r={rep}" for n, lv, rep in order[i + 1 :] if n == name
                    )
                    if left and isinstance(exc, TargetUnreachableError | EngineVersionChangedError):
                        self.failed_levels.append(f"{name}: not run, {exc.left_reason}: {left}")
                if not going:
                    gone.add(name)
                    await self._stop(name, backend)
        finally:
            for name, backend in backends.items():
                if name not in gone:
                    await self._stop(name, backend)

    def _say_restart(self, name: str, done: int, next_repeat: int) -> None:
        if self.events.on_engine:
            self.events.on_engine(
                name,
                f"engine stopped after repeat {done}; it starts again for repeat "
                f"{next_repeat} (restart_between_repeats)",
            )

    # --- one level at a time (``crossover decide``) --------------------------
    async def measure_level(
        self, name: str, level: Level, repeat: int,
        watch: LevelWatch | None = None, again: bool = False,
    ) -> bool:  # fmt: skip
        """Measure one level of target ``name`` (kept, not measured again, when it is done
        already, unless ``again``: the newer run then stands for the level, the older stays
        stored), leaving its engine up for the next call; the engine of another target
        still up is stopped first (one GPU). ``watch``: a sequential level (``_level``).
        False when the target cannot go on."""
        t = next((x for x in self.targets if x.cfg.name == name), None)
        if t is None:
            raise UsageError(f"no target {name} in this sweep")
        if not again and self._done(name, level, repeat):
            self.skipped += 1
            if self.events.on_skip:
                self.events.on_skip(name, level, repeat)
            return True
        for other in list(self._open):
            if other != name:
                await self.release(other)
        backend = self._open.get(name)
        if backend is None:
            backend = self._open[name] = self._backend(t)
        return await self._level(t, backend, level, repeat, watch)

    async def release(self, name: str | None = None) -> None:
        """Stop the engine ``measure_level`` left up for ``name`` (every one: ``None``)."""
        for other in [name] if name is not None else list(self._open):
            backend = self._open.pop(other, None) if other is not None else None
            if backend is not None and other is not None:
                await self._stop(other, backend)

    # --- engine starts and stops ------------------------------------------
    def _note_start(self, t: _Target) -> None:
        """Keep a new start of ``t``'s engine (its time to ready) in the database."""
        info = t.info
        if info.started_at is None or info.ready_s is None:
            return
        # its URL too (a new start listens on a port of its own): two quick starts in one
        # second can time alike to the millisecond (restart_between_repeats, a death)
        mark = (t.cfg.name, info.started_at, info.ready_s, info.url)
        if mark in self._starts_seen:
            return
        self._starts_seen.add(mark)
        starts: list[Any] = self.store.get_meta("engine_starts") or []
        replicas = info.settings.get("replicas", 1)
        start = EngineStart(
            target=t.cfg.name,
            started_at=info.started_at,
            ready_s=info.ready_s,
            replicas=replicas if isinstance(replicas, int) else 1,
        )
        starts.append(start.model_dump(mode="json"))
        self._start_up[t.cfg.name] = len(starts) - 1
        self.store.set_meta("engine_starts", starts)

    async def _stop(self, name: str, backend: TargetRunner) -> None:
        """Stop a target's engine; the time its stop took goes with its start."""
        t0 = time.perf_counter_ns()
        await backend.stop()
        index = self._start_up.pop(name, None)
        if index is None:
            return
        starts: list[Any] = self.store.get_meta("engine_starts") or []
        if index < len(starts) and starts[index].get("target") == name:
            starts[index]["stop_s"] = round((time.perf_counter_ns() - t0) / 1e9, 3)
            self.store.set_meta("engine_starts", starts)

    def engine_starts(self) -> list[EngineStart]:
        """Every engine start the database holds, in order."""
        raw: list[Any] = self.store.get_meta("engine_starts") or []
        return [EngineStart.model_validate(x) for x in raw]

    # --- the whole sweep --------------------------------------------------
    async def _measure(self, levels: list[Level], main_pass: bool = True) -> None:
        plans: list[tuple[_Target, list[tuple[Level, int]]]] = []
        for t in self.targets:
            if self.only is not None and t.cfg.name not in self.only:
                continue
            if t.cfg.name in self.version_refused:  # (a refine pass: it measures nothing)
                continue
            mine = levels
            if main_pass and t.cfg.concurrency:
                mine = [Level("concurrency", c) for c in t.cfg.concurrency]
            # repeat-major: a whole curve first, then the next repeat, so repeats are
            # apart in time (drift shows as spread) and a cut-short sweep has full curves
            todo = [
                (c, r)
                for r in range(self.config.repeats)
                for c in mine
                if not self._done(t.cfg.name, c, r)
            ]
            versions = self._held_versions.get(t.cfg.name) or {}
            # kept runs of two versions (a redo cut short) leave its engine to start too
            mixed = any(not same_version(v, w) for v in versions for w in versions)
            if (todo or mixed) and t.cfg.name in self._settings_redo and versions:
                # its engine starts anyway: its version then says which kept runs of
                # unchanged settings are of another one, measured again too (_kept_as_now
                # passes over the others once it has started)
                todo = [(c, r) for r in range(self.config.repeats) for c in mine]
            self.skipped += len(mine) * self.config.repeats - len(todo)
            for c, r in levels_skipped(mine, self.config.repeats, todo):
                if self.events.on_skip:
                    self.events.on_skip(t.cfg.name, c, r)
            plans.append((t, todo))
        if self.cluster is None and self.config.interleave:
            await self._run_interleaved(plans)
            return
        if self.cluster is None:  # one target after another: one GPU is enough
            for t, todo in plans:
                await self._run_target(t, todo)
            return
        # on a cluster every target is its own Ray actor, placed by its resources: they
        # run side by side where the cluster has room (Ray queues the rest)
        tasks = [asyncio.ensure_future(self._run_target(t, todo)) for t, todo in plans]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self) -> SweepOutcome:
        await self._measure(self.config.levels())
        _, findings = self._analysed()
        if self.config.refine:  # along concurrency only (the config says so)
            spent = 0
            measured = set(self.config.concurrency or []) | set(self._measured_levels())
            while spent < self.config.refine_budget:
                left = self.config.refine_budget - spent
                width = self.config.refine_width
                # crossovers first: an inconclusive bracket (often a metric where the two
                # targets are equal within noise) gets only what they leave of the budget
                # not between a pair one side of which measures nothing more (its engine
                # another version than its runs'): the other side alone would spend it
                open_pairs = [
                    f
                    for f in findings
                    if f.a not in self.version_refused and f.b not in self.version_refused
                ]
                new = propose_refinement(
                    open_pairs,
                    measured,
                    target_rel_width=width,
                    budget=left,
                    include_inconclusive=False,
                ) or propose_refinement(open_pairs, measured, target_rel_width=width, budget=left)
                if not new:
                    break
                if self.events.on_refine:
                    self.events.on_refine(sorted(new), left - len(new))
                await self._measure([Level("concurrency", c) for c in new], main_pass=False)
                spent += len(new)
                measured |= set(new)
                _, findings = self._analysed()
        sweep, findings = self._analysed()
        sweep.write(self.out / "sweep.json")
        left_out: dict[str, int] = {}
        if self.only is not None:
            for r in sweep.runs:
                if r.target not in self.only:
                    left_out[r.target] = left_out.get(r.target, 0) + 1
        return SweepOutcome(
            sweep,
            findings,
            self.ran,
            self.skipped,
            self.failed_levels,
            self.version_refused,
            left_out,
        )

    def _measured_levels(self) -> list[int]:
        out = []
        for row in self.store.runs():
            if row.key and row.status == "done":
                c = parse_run_key(row.key)[1].concurrency
                if c is not None:
                    out.append(c)
        return out

    # --- the sweep file ---------------------------------------------------
    def sweep_file(self) -> SweepFile:
        """The sweep as sweep.json holds it: every finished run, read with the tie margin."""
        return self._analysed()[0]

    def _analysed(self) -> tuple[SweepFile, list[Finding]]:
        """The sweep (:meth:`sweep_file`) and the findings its crossovers and inconclusive
        brackets come from, read with the sweep's tie margin (``reanalyze``)."""
        runs: list[SweepRun] = []
        by_target = {t.cfg.name for t in self.targets}
        for row in finished_rows(self.store).values():
            assert row.key is not None  # finished_rows keeps only these
            assert row.summary is not None
            name, level, repeat = parse_run_key(row.key)
            if name not in by_target:
                continue
            samples = self.store.samples(row.run_id)
            prom = [
                ServerMetricsSample(t_s=t, values=d) for s, t, d in samples if s == "prometheus"
            ]
            gpus = [GpuSample.model_validate(d) for s, _, d in samples if s == "gpu"]
            part = part_of(samples)
            runs.append(
                SweepRun(
                    target=name,
                    concurrency=level.concurrency,
                    rate=level.rate,
                    repeat=repeat,
                    summary=RunSummary.model_validate(row.summary),
                    server_metrics=prom or None,
                    gpu=gpus or None,
                    placement=Placement.model_validate(
                        row.context.get("placement") or LOCAL_PLACEMENT
                    ),
                    part=part,
                )
            )
        runs.sort(key=lambda x: (x.target, x.axis, x.level, x.repeat))
        infos = self._target_infos()
        roofline = list(self.config.roofline)
        for t in self.targets:
            if t.cfg.roofline:
                roofline.append(
                    RooflineFacts.model_validate({"target": t.cfg.name, **t.cfg.roofline})
                )
        sweep = SweepFile(
            targets=infos,
            runs=runs,
            roofline=roofline,
            started_at=self.started_at,
            engine_starts=self.engine_starts(),
            hosts=kept_hosts(self.store.get_meta("hosts")),
            workload={
                **self.config.identity(),
                "concurrency": self.config.concurrency,
                **({"rates": self.config.rates} if self.config.rates is not None else {}),
                **(
                    {"duration_s_per_level": self.config.duration_s_per_level}
                    if self.config.rates is not None
                    else {}
                ),
                "repeats": self.config.repeats,
                **(
                    {"restart_between_repeats": True} if self.config.restart_between_repeats else {}
                ),
                "name": self.config.name,
                **({"slo": self.config.slo.text()} if self.config.slo else {}),
            },
        )
        return reanalyze(sweep, tie_rel=self.tie_rel)

    def _target_infos(self) -> list[TargetInfo]:
        stored: dict[str, Any] = self.store.get_meta("targets") or {}
        for t in self.targets:
            if t.info.engine is not None or t.info.url is not None:
                stored[t.cfg.name] = t.info.model_dump(mode="json")
            elif t.cfg.launch is None and t.cfg.name not in stored:
                urls = t.cfg.base_urls
                replicas = {"replicas": len(urls), "replica_urls": urls} if len(urls) > 1 else {}
                stored[t.cfg.name] = TargetInfo(
                    name=t.cfg.name,
                    engine=t.cfg.engine,
                    url=urls[0],
                    model=t.cfg.model,
                    settings=replicas,
                ).model_dump()
        self.store.set_meta("targets", stored)
        return [
            TargetInfo.model_validate(stored[t.cfg.name])
            if t.cfg.name in stored
            else TargetInfo(name=t.cfg.name)
            for t in self.targets
        ]

    def write_sweep_file(self) -> SweepFile:
        sweep = self.sweep_file()
        sweep.write(self.out / "sweep.json")
        return sweep

    def close(self) -> None:
        """Close the store and let the folder go (another writer may take it then)."""
        try:
            self.store.close()
        finally:
            self.lock.release()


def part_of(samples: Sequence[tuple[str, float, dict[str, Any]]]) -> RunPart | None:
    """A level stopped sending on purpose (its ``sequential_stop`` sample: ``crossover
    decide``): the requests it planned and why; ``None`` for a whole level."""
    for source, _, data in samples:
        if source == SEQUENTIAL_STOP:
            planned = data.get("planned")
            return RunPart(
                planned=int(planned) if planned is not None else None,
                why=str(data.get("why") or ""),
            )
    return None


def levels_skipped(
    levels: list[Level], repeats: int, todo: list[tuple[Level, int]]
) -> list[tuple[Level, int]]:
    want = set(todo)
    return [(c, r) for c in levels for r in range(repeats) if (c, r) not in want]
