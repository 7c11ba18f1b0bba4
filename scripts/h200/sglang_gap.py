"""Where a closed-loop level's time goes: the engine's own step time (SGLang's scheduler
log) against the per-token interval the client received, and the idle time between waves.

    python scripts/h200/sglang_gap.py docs/results/h200/sglang-a [TARGET,...] [LEVEL,...]
    python scripts/h200/sglang_gap.py docs/results/h200/vllm-a vllm 128,256,512

Per valid run (target, level, repeat) it prints:

* `step ms`: SGLang's decode step at the full batch, `#running-req / gen throughput` of
  the scheduler's `Decode batch` lines (every 40 decode steps, `decode_log_interval`) whose
  40 steps ran at that batch with no prefill or idle time between them (the line before is
  a decode line at the same batch); median and range. `graphs`: the line's `cuda graph`
  flag. Only for SGLang targets (their log is `engines/TARGET.log.gz`); vLLM logs its
  throughput every 10 s, too coarse for a level of 3-30 s.
* `client ms`: the interval between tokens as the client received them in steady decode,
  the median over requests of each request's median chunk gap from its 6th chunk on (the
  admission stall after the first token is left out); `tok/chunk`: usage tokens over
  token-carrying chunks (1.00: every token in its own SSE event).
* `prefill s`: per wave, the time from a wave's first prefill batch to its last (SGLang's
  `input throughput` is the batch's tokens over the time since the previous `Prefill
  batch` line, so consecutive lines chain to the millisecond); `batches`: how many.
* `idle s`: before each later wave, the time from the previous wave's last prefill to this
  wave's first, less the decode work in between (255 steps at the segment's step time);
  the scheduler had nothing to run: the closed-loop client sends a wave's requests only
  as it receives the previous wave's last tokens. A prefill line with `#running-req: 0`
  starts a wave (or SGLang's one request over its 511-request cap at c=512, which runs
  alone after the wave: its own segment).
* `gpu idle`: NVML samples (about 1 s apart) in the run's steady window whose utilisation
  is below 50%, of all samples in the window.
* `loop p99`: the client event loop's own lag (ms, p99) during the run.

Engine log lines carry whole seconds; a line belongs to the run whose [start, start +
duration] (the run's `created_at`, second-rounded) holds it.
"""

from __future__ import annotations

import gzip
import re
import statistics as st
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from crossover.errors import UsageError
from crossover.pipes import run_tool
from crossover.records.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from waves import arguments, sweep_database, valid_runs

LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (Prefill|Decode) batch, (.*)$")
FIELD = re.compile(r"(#?[a-z][a-z -]*?(?: \(token/s\))?): ([-0-9.a-zA-Z]+)")


@dataclass
class Line:
    t: float  # epoch seconds (whole)
    kind: str  # "Prefill" or "Decode"
    f: dict[str, float | str]

    @property
    def running(self) -> int:
        return int(self.f["#running-req"])

    @property
    def tokens(self) -> int:
        return int(self.f.get("#new-token", 0))

    @property
    def rate(self) -> float:
        key = "input throughput (token/s)" if self.kind == "Prefill" else "gen throughput (token/s)"
        return float(self.f[key])


def parse_log(path: Path) -> list[Line]:
    out = []
    with gzip.open(path, "rt", errors="replace") as fh:
        for raw in fh:
            m = LINE.match(raw.strip())
            if not m:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            f: dict[str, float | str] = {}
            for k, v in FIELD.findall(m.group(3)):
                try:
                    f[k.strip()] = float(v)
                except ValueError:
                    f[k.strip()] = v
            out.append(Line(t.timestamp(), m.group(2), f))
    return out


@dataclass
class EngineLevel:
    steps_ms: list[float] = field(default_factory=list)
    graphs: set[str] = field(default_factory=set)
    waves: list[tuple[int, float]] = field(default_factory=list)  # (batches, prefill s)
    idle_s: list[float] = field(default_factory=list)


def engine_level(lines: list[Line], t0: float, t1: float, cap: int) -> EngineLevel:
    """The scheduler's lines of one run: [t0, t1] in whole seconds; cap = the full batch."""
    idx = [i for i, ln in enumerate(lines) if t0 <= ln.t <= t1]
    ev = EngineLevel()
    # decode step at the full batch, from 40-step intervals with nothing else in them
    for i in idx:
        ln, prev = lines[i], lines[i - 1]
        if ln.kind == "Decode" and prev.kind == "Decode" and ln.running == prev.running == cap:
            ev.steps_ms.append(1000.0 * ln.running / ln.rate)
            ev.graphs.add(str(ln.f.get("cuda graph")))
    # waves: a prefill with #running-req 0 (and a real prompt) starts one
    pre = [i for i in idx if lines[i].kind == "Prefill" and lines[i].tokens > 1]
    starts = [i for i in pre if lines[i].running == 0]
    for w, s in enumerate(starts):
        end = starts[w + 1] if w + 1 < len(starts) else (idx[-1] + 1 if idx else s + 1)
        seg = [i for i in idx if s <= i < end]
        # admission: from the wave's first prefill line to the last one before decoding
        # runs at the full batch (chained: each line's gap is since the previous one)
        full = next((i for i in seg if lines[i].kind == "Decode" and lines[i].running == cap), end)
        batch = [i for i in seg if i < full and lines[i].kind == "Prefill" and lines[i].tokens > 1]
        span = sum(lines[i].tokens / lines[i].rate for i in batch[1:] if lines[i].rate > 0)
        ev.waves.append((len(batch), span))
        if w == 0:
            continue
        # idle before this wave: the gap since the previous prefill line, less the decode
        # work after it (255 steps), when that segment decoded at one batch size throughout
        gap = lines[s].tokens / lines[s].rate
        before = [i for i in idx if starts[w - 1] <= i < s]
        last_pre = max(i for i in before if lines[i].kind == "Prefill" and lines[i].tokens > 1)
        dec = [i for i in before if i > last_pre and lines[i].kind == "Decode"]
        sizes = {lines[i].running for i in dec[1:]}
        steps = [1000.0 * lines[i].running / lines[i].rate for i in dec[1:]]
        if len(sizes) == 1 and steps:
            ev.idle_s.append(gap - 255 * st.median(steps) / 1000.0)
        else:
            ev.idle_s.append(float("nan"))
    return ev


def rng(values: list[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "–"
    lo, mid, hi = min(values), st.median(values), max(values)
    if fmt.format(lo) == fmt.format(hi):
        return fmt.format(mid)
    return f"{fmt.format(mid)} ({fmt.format(lo)}–{fmt.format(hi)})"


def main(folder: Path, targets: list[str] | None, levels: list[int] | None) -> None:
    if not folder.is_dir():  # its engine logs are beside the database
        raise UsageError(f"{folder}: not a sweep folder")
    logs: dict[str, list[Line]] = {}
    with sweep_database(folder, "gap-") as db:
        print(
            "| target | c | r | step ms (graphs) | client ms | tok/chunk | prefill s per wave "
            "(batches) | idle s before later waves | gpu idle | loop p99 |"
        )
        print("|---|---:|---:|---|---:|---:|---|---|---:|---:|")
        with Store(db, read_only=True) as store:  # it only reads: nothing written there
            for name, c, rep, run in valid_runs(store, targets, levels):
                s = run.summary
                assert s is not None
                recs = sorted(
                    store.records(run.run_id, include_warmup=False), key=lambda r: r.t_send_ns
                )
                gaps = [
                    float(np.median(np.diff(r.chunk_arrival_ns[5:]))) / 1e6
                    for r in recs
                    if len(r.chunk_arrival_ns) > 8
                ]
                chunks = sum(len(r.chunk_arrival_ns) for r in recs)
                toks = sum(r.completion_tokens or 0 for r in recs)
                win = s.get("window") or {}
                gpu = [d for src, _, d in store.samples(run.run_id) if src == "gpu"]
                inwin = [g for g in gpu if win and win["start_s"] <= g["t_s"] <= win["end_s"]]
                idle = sum(1 for g in inwin if (g.get("util_pct") or 0) < 50)
                loop = (s.get("client_loop") or {}).get("p99_ms")
                step = prefill = idle_s = "–"
                log = folder / "engines" / f"{name}.log.gz"
                if s.get("engine", {}).get("name") == "sglang" and log.is_file():
                    if name not in logs:
                        logs[name] = parse_log(log)
                    t0 = float(int(run.created_at))
                    ev = engine_level(logs[name], t0, t0 + s["duration_s"] + 1, min(c, 511))
                    graphs = "/".join(sorted(ev.graphs)) or "–"
                    step = f"{rng(ev.steps_ms, '{:.2f}')} ({graphs})"
                    prefill = ", ".join(f"{sp:.2f} ({n})" for n, sp in ev.waves) or "–"
                    idle_s = ", ".join("mixed" if x != x else f"{x:.2f}" for x in ev.idle_s) or "–"
                print(
                    f"| {name} | {c} | {rep} | {step} | {rng(gaps, '{:.2f}')} | "
                    f"{toks / chunks:.3f} | {prefill} | {idle_s} | {idle}/{len(inwin)} | "
                    f"{loop if loop is None else f'{loop:.1f}'} |"
                )


def cli(args: list[str]) -> int:
    """``python scripts/h200/sglang_gap.py ARGS``: 0, or 1 with one line on stderr."""
    if not args:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        only, lv = arguments(args)
        main(Path(args[0]), only, lv)
    except UsageError as exc:  # not a results database: one line
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # piped into `head`: a quiet stop (141), as the crossover CLI's, not a traceback
    run_tool(lambda: cli(sys.argv[1:]))
