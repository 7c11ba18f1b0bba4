"""What a level costs after its load: the counting between one level's last request and
the next level's first, while the engine waits (GPU time held doing nothing).

After the load ends, ``crossover.measure.execute`` re-tokenizes every request's streamed
text (the text witness: ``count_and_retokenize``, in a thread) and builds the run summary
(``summarize``). This times both, separately, on real levels of a sweep's database: the
records as they were stored, their text witness cleared, re-tokenized with the tokenizer
the sweep used (a local HF folder: every chunk encoded, as the sweep does), then the
summary built from them as ``resummarize`` does. Each figure must reproduce the one the
sweep stored: the token counts record by record, the summary as a whole (its JSON).

Before and after are measured in one run: each step runs in a child process on this
checkout's ``src`` and on ``--before``'s (a git ref, exported with ``git archive``),
interleaved per repeat; the best of ``--repeats`` is kept. Both must give the same figures.

    .venv/bin/python bench/level_overhead.py --json docs/results/level_overhead.json

The database (``--db``; by default the committed vLLM-in-Triton sweep,
``docs/results/h200/triton/sweep.db.xz``, whose ``vllm`` runs these are) is copied, or
decompressed, to a temporary folder first (it is never written). The tokenizer
(``--tokenizer``) is Llama 3's shape; without one, ``models synth --config-only`` writes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the commit before the post-load counting was made faster
BEFORE = "9e2c7f6"
KEYS = ("vllm|c=256|r=1", "vllm|c=512|r=1")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def child(db: Path, tokenizer: str, keys: list[str]) -> dict[str, Any]:
    """One tree's timings (this process imports whichever ``crossover`` PYTHONPATH names)."""
    from crossover.measure.summary import ENGINE_COUNTER_SAMPLE, LOOP_SAMPLE, count_and_retokenize
    from crossover.metrics.run import RunContext, summarize
    from crossover.metrics.summary import EngineCounter, LoopLag
    from crossover.records.store import Store
    from crossover.workload import load_tokenizer

    tok = load_tokenizer(tokenizer)
    tok.encode("warm")
    out: dict[str, Any] = {}
    with Store(db) as store:
        by_key = {r.key: r for r in store.runs()}
        for key in keys:
            row = by_key[key]
            stored = store.records(row.run_id)
            fresh = [
                r.model_copy(update={"stream_tokens": None, "chunk_text_tokens": None})
                for r in stored
            ]
            t0 = time.perf_counter()
            count_and_retokenize(fresh, tok)
            retok_s = time.perf_counter() - t0
            counts = [(r.stream_tokens, r.chunk_text_tokens) for r in fresh]
            same_counts = counts == [(r.stream_tokens, r.chunk_text_tokens) for r in stored]

            ctx = RunContext.model_validate(row.context["context"])
            engine = loop = None
            for source, _, data in store.samples(row.run_id):
                if source == ENGINE_COUNTER_SAMPLE:
                    engine = EngineCounter.model_validate(data)
                elif source == LOOP_SAMPLE:
                    loop = LoopLag.model_validate(data)
            t0 = time.perf_counter()
            summary = summarize(fresh, ctx, engine, loop)
            summary_s = time.perf_counter() - t0
            text = json.dumps(summary.to_json_dict(), sort_keys=True)
            out[key] = {
                "requests": len(stored),
                "chunks": sum(len(r.chunk_arrival_ns) for r in stored),
                "retokenize_s": retok_s,
                "summary_s": summary_s,
                "counts_digest": hashlib.sha256(repr(counts).encode()).hexdigest()[:16],
                "summary_digest": hashlib.sha256(text.encode()).hexdigest()[:16],
                "counts_as_stored": same_counts,
                "summary_as_stored": text == json.dumps(row.summary, sort_keys=True),
            }
    return out


def run_child(src: Path, db: Path, tokenizer: str, keys: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--child", "--db", str(db), "--tokenizer", tokenizer,
           "--keys", ",".join(keys)]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"child on {src} failed:\n{p.stderr[-3000:]}")
    res: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return res


def export_src(ref: str, into: Path) -> Path:
    """``ref``'s ``src`` folder, written under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def synth_tokenizer(into: Path) -> str:
    out = into / "mh"
    subprocess.run(
        [sys.executable, "-m", "crossover", "models", "synth", "--arch", "llama-3-8b",
         "--format", "hf", "--dtype", "bf16", "--config-only", "--out", str(out), "-q"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True,
    )  # fmt: skip
    return str(out / "hf")


def table(res: dict[str, Any]) -> str:
    lines = [
        "| level | requests | chunks | step | before s | after s | before / after |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for key, r in res["levels"].items():
        for step in ("retokenize", "summary"):
            b, a = r["before"][f"{step}_s"], r["after"][f"{step}_s"]
            level = key.replace("|", "/")
            lines.append(
                f"| {level} | {r['requests']} | {r['chunks']} | {step} | {b:.3f} | {a:.3f} "
                f"| {b / a:.1f}x |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--db", type=Path, default=ROOT / "docs" / "results" / "h200" / "triton" / "sweep.db.xz"
    )
    ap.add_argument("--tokenizer", help="HF tokenizer folder (default: synth Llama 3's)")
    ap.add_argument("--keys", default=",".join(KEYS), help="the runs' keys, comma-separated")
    ap.add_argument("--before", default=BEFORE, help="git ref of the code before")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    keys = args.keys.split(",")
    if args.child:
        print(json.dumps(child(args.db, args.tokenizer, keys)))
        return 0
    if not args.db.is_file():
        print(f"no sweep database at {args.db}: nothing to measure")
        return 2
    # imported here, not at the top: a child imports the tree it times (``--before``'s may
    # predate this module)
    from crossover.records.copies import copy_database

    with tempfile.TemporaryDirectory(prefix="level-overhead-") as tmp_s:
        tmp = Path(tmp_s)
        db = copy_database(args.db, tmp / "sweep.db")
        tokenizer = args.tokenizer or synth_tokenizer(tmp)
        trees = {"before": export_src(args.before, tmp), "after": ROOT / "src"}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for i in range(args.repeats):
            for name, src in trees.items():
                log(f"repeat {i + 1}/{args.repeats}: {name}")
                runs[name].append(run_child(src, db, tokenizer, keys))
    levels: dict[str, Any] = {}
    for key in keys:
        level: dict[str, Any] = {}
        for name, rs in runs.items():
            first = rs[0][key]
            level["requests"], level["chunks"] = first["requests"], first["chunks"]
            level[name] = {
                **{k: first[k] for k in ("counts_digest", "summary_digest")},
                "counts_as_stored": all(r[key]["counts_as_stored"] for r in rs),
                "summary_as_stored": all(r[key]["summary_as_stored"] for r in rs),
                **{
                    f"{step}_s": min(r[key][f"{step}_s"] for r in rs)
                    for step in ("retokenize", "summary")
                },
                **{
                    f"{step}_all_s": [round(r[key][f"{step}_s"], 4) for r in rs]
                    for step in ("retokenize", "summary")
                },
            }
        b, a = level["before"], level["after"]
        level["same_figures"] = (b["counts_digest"], b["summary_digest"]) == (
            a["counts_digest"],
            a["summary_digest"],
        )
        levels[key] = level
    res: dict[str, Any] = {
        "command": "python bench/level_overhead.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "before": args.before,
        "after": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "repeats": args.repeats,
        "levels": levels,
    }
    res["table"] = table(res)
    print(res["table"])
    for key, level in levels.items():
        ok = level["same_figures"] and all(
            level[n][f] for n in trees for f in ("counts_as_stored", "summary_as_stored")
        )
        print(f"{key}: figures {'identical, and as stored' if ok else 'DIFFER'}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
