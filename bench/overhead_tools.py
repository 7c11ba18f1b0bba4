"""How ``client_overhead.py`` runs each tool as a user would, and reads what it did.

Every tool is one command in its own session (``start_new_session``), pinned to the
client core(s) by inheritance. While it runs, a sampler reads the CPU time of its whole
process tree (``/proc/PID/stat``: user + system of each process seen) every
``SAMPLE_S``, stamped with ``perf_counter_ns`` (CLOCK_MONOTONIC on Linux, the clock of
the calibration server's stamps). The server's ground truth for the run
(``/calibration/truth``: per request its arrival, first and last emission, tokens) then
splits the CPU:

* start-up: everything before the first request reached the server;
* steady state: from the moment the last stream got its first token to the moment the
  first stream sent its last one (every stream in flight, no connecting, no draining);
  its tokens are counted from the server's emissions (each request's tokens spread
  evenly between its first and last emission, which is how the server sends them);
* the rest (connecting, draining, summaries, writing results, exit) is reported as it is.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import resource
import shlex
import statistics
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

SAMPLE_S = 0.02
_TICK = os.sysconf("SC_CLK_TCK")


def http(url: str, method: str = "GET") -> dict[str, Any]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=60) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


# --- CPU of a process tree ----------------------------------------------------------


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
    return out


def _cpu_s(pid: int) -> float:
    """user + system of ``pid`` itself, in seconds."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return 0.0
    f = raw[raw.rfind(b")") + 2 :].split()
    return (int(f[11]) + int(f[12])) / _TICK


class TreeCPU(threading.Thread):
    """Samples the CPU seconds of a process and its descendants until it exits."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.samples: list[tuple[int, float]] = []
        self._seen: dict[int, float] = {}

    def run(self) -> None:
        root = self.proc.pid
        while self.proc.poll() is None:
            pids, todo = [], [root]
            while todo:
                p = todo.pop()
                pids.append(p)
                todo.extend(_children(p))
            for p in pids:
                self._seen[p] = max(self._seen.get(p, 0.0), _cpu_s(p))
            # each process's own time; one that exited keeps its last reading (one that
            # lived less than a sample is missed here, and counted in cpu_total_s)
            self.samples.append((time.perf_counter_ns(), sum(self._seen.values())))
            time.sleep(SAMPLE_S)

    def at(self, t_ns: int) -> float | None:
        """CPU seconds used by ``t_ns`` (linear between samples)."""
        s = self.samples
        if not s:
            return None
        if t_ns <= s[0][0]:
            return s[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(s):
            if t0 <= t_ns <= t1:
                return c0 + (c1 - c0) * (t_ns - t0) / max(t1 - t0, 1)
        return s[-1][1]


def run_command(
    argv: list[str], cwd: Path, timeout_s: float, env: dict[str, str]
) -> tuple[dict[str, Any], TreeCPU]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out: dict[str, Any] = {"command": shlex.join(argv)}
    with (cwd / "output.log").open("wb") as fh:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        sampler = TreeCPU(proc)
        sampler.start()
        try:
            out["returncode"] = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
            out["returncode"] = None
            out["timed_out_after_s"] = timeout_s
        sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["wall_s"] = time.monotonic() - t0
    out["cpu_total_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out["returncode"] != 0:
        text = (cwd / "output.log").read_text(errors="replace").splitlines()
        out["output_tail"] = "\n".join(ln[:200] for ln in text[-12:])
    return out, sampler


# --- truth and the CPU split -----------------------------------------------------------


def truth_of_run(url: str, streams: int) -> dict[str, Any]:
    """The server's record of the run's ``streams`` measured requests (the latest to
    arrive: a tool's own warm-up or test request came before them)."""
    t = http(url + "/calibration/truth")
    reqs = sorted((r for r in t["requests"] if r.get("stream")), key=lambda r: r["arrival_ns"])
    reqs = [r for r in reqs[-streams:] if r.get("first_emit_ns") and r.get("last_emit_ns")]
    gaps = [r["emitted_gap_ms"] for r in reqs if r.get("emitted_gap_ms") is not None]
    lag = t.get("later_chunk_lag_ms") or {}
    return {
        "requests": reqs,
        "emitted_gap_p50_ms": statistics.median(gaps) if gaps else None,
        "server_lag_mean_ms": lag.get("mean"),
        "server_lag_max_ms": lag.get("max"),
        "tokens_sent": sum(r["tokens_sent"] for r in reqs),
    }


def _tokens_between(reqs: list[dict[str, Any]], a: int, b: int) -> float:
    n = 0.0
    for r in reqs:
        f, last, k = r["first_emit_ns"], r["last_emit_ns"], r["tokens_sent"]
        if last <= f:
            n += k if a <= f <= b else 0
            continue
        lo, hi = max(a, f), min(b, last)
        if hi > lo:
            n += (k - 1) * (hi - lo) / (last - f)
    return n


def split_cpu(sampler: TreeCPU, truth: dict[str, Any], cpu_total_s: float) -> dict[str, Any]:
    reqs = truth["requests"]
    if not reqs:
        return {"cpu_total_s": cpu_total_s}
    first_arrival = min(r["arrival_ns"] for r in reqs)
    all_in = max(r["first_emit_ns"] for r in reqs)
    first_out = min(r["last_emit_ns"] for r in reqs)
    last_emit = max(r["last_emit_ns"] for r in reqs)
    c_start, c_in, c_out, c_end = (sampler.at(x) for x in (first_arrival, all_in, first_out,
                                                         last_emit))  # fmt: skip
    res: dict[str, Any] = {"cpu_total_s": cpu_total_s, "cpu_startup_s": c_start}
    if c_start is not None and c_end is not None:
        res["cpu_load_s"] = c_end - c_start
        res["cpu_after_s"] = cpu_total_s - c_end
    if c_in is not None and c_out is not None and first_out > all_in:
        steady_cpu = c_out - c_in
        tok = _tokens_between(reqs, all_in, first_out)
        res.update(
            steady_s=(first_out - all_in) / 1e9,
            steady_cpu_s=steady_cpu,
            steady_tokens=tok,
            steady_tokens_per_cpu_s=tok / steady_cpu if steady_cpu > 0 else None,
        )
    return res


# --- what each tool measured ---------------------------------------------------------------


def _num(d: Any, *path: str) -> float | None:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return float(d) if isinstance(d, int | float) else None


def stamp_stats(records: list[tuple[list[int], list[int | None]]]) -> dict[str, Any]:
    """From per-request (arrival stamps, server emission stamps) of token chunks: TPOT
    and ITL p50 as crossover defines them, and how late the first and last token were
    stamped (arrival - emission, ms)."""
    tpots, itls, first, last = [], [], [], []
    for arr, emit in records:
        if len(arr) >= 2:
            tpots.append((arr[-1] - arr[0]) / (len(arr) - 1) / 1e6)
            itls.extend((b - a) / 1e6 for a, b in itertools.pairwise(arr))
        if arr and emit and emit[0] is not None and emit[-1] is not None:
            first.append((arr[0] - emit[0]) / 1e6)
            last.append((arr[-1] - emit[-1]) / 1e6)
    return {
        "tpot_p50_ms": statistics.median(tpots) if tpots else None,
        "itl_p50_ms": statistics.median(itls) if itls else None,
        "first_token_late_mean_ms": statistics.fmean(first) if first else None,
        "last_token_late_mean_ms": statistics.fmean(last) if last else None,
        "last_token_late_p50_ms": statistics.median(last) if last else None,
    }


def own_truth_tpot(rows: list[dict[str, Any]]) -> float | None:
    """crossover's TPOT formula, ``(t_last - t_first) / (N - k)`` with k the tokens of
    the first delivery as it arrived, applied to the server's emission stamps of the
    first and last token instead of their arrival stamps: the truth for what crossover
    reports. Where the server fell behind and wrote its catch-up tokens with the first,
    the first delivery carries k > 1 tokens and this differs from the server's per
    request gap ``(last - first) / (N - 1)``, the truth of the tools that divide by N - 1."""
    from crossover.metrics.requests import tpot_ms
    from crossover.records.model import RequestRecord

    vals = []
    for row in rows:
        emit = row.get("chunk_emitted_ns") or []
        if not emit or emit[0] is None or emit[-1] is None:
            continue
        rec = RequestRecord.model_validate(row)
        rec.t_first_ns, rec.t_last_ns = emit[0], emit[-1]
        v = tpot_ms(rec)
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else None


def crossover_argv(
    binary: str, url: str, c: int, tokens: int, work: Path, transport: str = "aiohttp",
    workers: str = "1",
) -> list[str]:  # fmt: skip
    return [
        binary, "run", "--url", url, "--model", "calibration", "--engine", "vllm",
        "--output-tokens", str(tokens), "--input-tokens", "8",
        "--concurrency", str(c), "--requests", str(c), "--warmup", "0",
        "--transport", transport, "--workers", workers,
        "--out", str(work), "--json", str(work / "summary.json"),
    ]  # fmt: skip


def crossover_result(work: Path) -> dict[str, Any]:
    import sqlite3

    res: dict[str, Any] = {}
    f = work / "summary.json"
    if f.is_file():
        s = json.loads(f.read_text())
        res["reported_tpot_p50_ms"] = _num(s, "tpot_ms", "p50")
        res["reported_itl_p50_ms"] = _num(s, "itl_ms", "p50")
        res["verdict"] = s.get("verdict")
        res["client_loop"] = s.get("client_loop")
    db = work / "results.db"
    if db.is_file():
        con = sqlite3.connect(str(db))
        rows = [json.loads(r[0]) for r in con.execute("SELECT record FROM requests WHERE warmup=0")]
        con.close()
        res.update(
            stamp_stats([(r["chunk_arrival_ns"], r.get("chunk_emitted_ns") or []) for r in rows])
        )
        res["own_truth_tpot_p50_ms"] = own_truth_tpot(rows)
        # what it reported is what counts; the stamps' figures only check them
        res["tpot_p50_ms"] = res.get("reported_tpot_p50_ms", res.get("tpot_p50_ms"))
        res["itl_p50_ms"] = res.get("reported_itl_p50_ms", res.get("itl_p50_ms"))
    return res


def minimal_argv(
    python: str, script: Path, url: str, c: int, tokens: int, work: Path, name: str = "minimal"
) -> list[str]:
    return [python, str(script), url, str(c), str(tokens), str(work / f"{name}.json")]


def minimal_result(work: Path, name: str = "minimal") -> dict[str, Any]:
    """The minimal (or bare) reference client's stamps, from its records."""
    f = work / f"{name}.json"
    if not f.is_file():
        return {}
    recs = json.loads(f.read_text())
    return stamp_stats([(r["arrival_ns"], r["emitted_ns"]) for r in recs])


def guidellm_argv(
    binary: str, url: str, c: int, tokens: int, tok_dir: Path, work: Path
) -> list[str]:
    return [
        binary, "run",
        "--backend", f"kind=openai_http,target={url},model=calibration,"
                     "request_format=/v1/completions",
        "--profile", f"kind=concurrent,streams={c}",
        "--data", f"kind=synthetic_text,prompt_tokens=8,output_tokens={tokens}",
        "--tokenizer", f"kind=huggingface_auto,model={tok_dir}",
        "--constraint", f"kind=max_requests,count={c}",
        "--output", f"kind=json,path={work / 'guidellm.json'}",
        "--disable-console-interactive",
    ]  # fmt: skip


def guidellm_result(work: Path) -> dict[str, Any]:
    f = work / "guidellm.json"
    if not f.is_file():
        return {}
    m = json.loads(f.read_text())["benchmarks"][0]["metrics"]
    return {
        # GuideLLM's inter_token_latency is crossover's TPOT; it has no per-chunk ITL
        "tpot_p50_ms": _num(m, "inter_token_latency_ms", "successful", "median"),
        "itl_p50_ms": None,
    }


def aiperf_argv(binary: str, url: str, c: int, tokens: int, tok_dir: Path, work: Path) -> list[str]:
    return [
        binary, "profile", "--model", "calibration", "--url", url,
        "--endpoint-type", "completions", "--streaming",
        "--concurrency", str(c), "--request-count", str(c),
        "--prompt-input-tokens-mean", "8", "--prompt-input-tokens-stddev", "0",
        "--prompt-output-tokens-mean", str(tokens), "--prompt-output-tokens-stddev", "0",
        "--extra-inputs", "ignore_eos:true", "--extra-inputs", f"min_tokens:{tokens}",
        "--tokenizer", str(tok_dir), "--use-server-token-count",
        "--output-artifact-dir", str(work / "artifacts"), "--ui-type", "none",
        "--no-server-metrics", "--no-gpu-telemetry",
    ]  # fmt: skip


def aiperf_result(work: Path) -> dict[str, Any]:
    f = work / "artifacts" / "profile_export_aiperf.json"
    if not f.is_file():
        return {}
    d = json.loads(f.read_text())
    # AIPerf's inter_token_latency is crossover's TPOT; inter_chunk_latency its ITL
    return {"tpot_p50_ms": _num(d, "inter_token_latency", "p50"),
            "itl_p50_ms": _num(d, "inter_chunk_latency", "p50")}  # fmt: skip


def vllm_argv(binary: str, url: str, c: int, tokens: int, tok_dir: Path, work: Path) -> list[str]:
    return [
        binary, "bench", "serve", "--backend", "openai", "--base-url", url,
        "--endpoint", "/v1/completions", "--model", "calibration", "--tokenizer", str(tok_dir),
        "--dataset-name", "random", "--random-input-len", "8",
        "--random-output-len", str(tokens), "--ignore-eos",
        "--num-prompts", str(c), "--max-concurrency", str(c),
        "--save-result", "--result-dir", str(work), "--result-filename", "vllm.json",
    ]  # fmt: skip


def vllm_result(work: Path) -> dict[str, Any]:
    f = work / "vllm.json"
    if not f.is_file():
        return {}
    d = json.loads(f.read_text())
    return {"tpot_p50_ms": _num(d, "median_tpot_ms"), "itl_p50_ms": _num(d, "median_itl_ms")}
