"""Every committed H200 sweep, re-summarized from its raw records, against its sweep.json.

For each results folder with a ``sweep.db`` (or ``sweep.db.xz``, decompressed into a
temporary folder: the committed files are never touched) and a ``sweep.json``, every
published run is summarized again from its records with the code as it is now, and its
figures (throughput; TTFT, TPOT and E2E mean, p50 and p99) and verdict compared with the
published ones:

    python scripts/h200/check_resummarize.py [docs/results/h200/vllm-a ...]

(no argument: every folder under docs/results/h200). A figure that moved fails (exit 1)
unless it is one of EXPLAINED below (each with the rule of docs/metrics.md that moved it);
a verdict that changed is listed (later integrity rules may judge old records more
strictly: docs/results/h200/README.md, "Re-summarized with today's code", says why).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from crossover.measure import resummarize
from crossover.records.copies import copy_database
from crossover.records.store import Store

ROOT = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200"
FIGURES = ("total_tokens_per_s", "output_tokens_per_s", "requests_per_s")
STATS = [(m, s) for m in ("ttft_ms", "tpot_ms", "e2e_ms") for s in ("mean", "p50", "p99")]

#: Figures that moved for a stated reason, pinned one by one (folder, run key, figure):
#: TPOT divides by the tokens after the first delivery (N - k), where the published figures
#: divided by N - 1; these runs had requests whose first two chunks arrived together.
_N_MINUS_K = "TPOT over the tokens after the first delivery (N - k, docs/metrics.md)"
EXPLAINED: dict[tuple[str, str, str], str] = {
    ("sglang-a", "sglang-nographs|c=128|r=1", "tpot_ms.mean"): _N_MINUS_K,
    ("sglang-a", "sglang-nographs|c=512|r=0", "tpot_ms.mean"): _N_MINUS_K,
    ("vllm-a", "vllm|c=64|r=0", "tpot_ms.mean"): _N_MINUS_K,
    ("vllm-a", "vllm|c=128|r=1", "tpot_ms.mean"): _N_MINUS_K,
    ("vllm-a", "vllm-fp8|c=64|r=1", "tpot_ms.mean"): _N_MINUS_K,
    ("vllm-a", "vllm-fp8|c=64|r=1", "tpot_ms.p99"): _N_MINUS_K,
    ("vllm-b", "vllm|c=1|r=0", "tpot_ms.mean"): _N_MINUS_K,
    ("vllm-b", "vllm|c=16|r=0", "tpot_ms.mean"): _N_MINUS_K,
}
#: and an explained figure may move by this much at most (the largest seen: 0.1%)
EXPLAINED_REL = 0.002


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


def check(folder: Path, tmp: Path) -> tuple[int, list[str], list[str], list[str]]:
    """Runs checked, figures moved, figures moved for a stated reason, verdicts changed."""
    db = copy_database(folder, tmp / f"{folder.name}.db")
    published = json.loads((folder / "sweep.json").read_text("utf-8"))
    store = Store(db)
    moved: list[str] = []
    explained: list[str] = []
    verdicts: list[str] = []
    checked = 0
    try:
        by_key = {row.key: row.run_id for row in store.runs()}
        for run in published["runs"]:
            key = f"{run['target']}|c={run['concurrency']}|r={run['repeat']}"
            want = run.get("summary")
            if key not in by_key or not want:
                continue
            got = resummarize(store, by_key[key]).model_dump(mode="json")
            checked += 1
            for f in FIGURES:
                if not _close(got["throughput"][f], want["throughput"][f]):
                    moved.append(f"{key} {f}: {want['throughput'][f]} -> {got['throughput'][f]}")
            for m, s in STATS:
                exp = (want.get(m) or {}).get(s)
                now = got[m].get(s)
                if exp is None or _close(now, exp):
                    continue
                why = EXPLAINED.get((folder.name, key, f"{m}.{s}"))
                if why and now is not None and abs(now - exp) <= EXPLAINED_REL * abs(exp):
                    explained.append(f"{key} {m}.{s}: {exp:.6g} -> {now:.6g} ({why})")
                else:
                    moved.append(f"{key} {m}.{s}: {exp} -> {now}")
            if got["verdict"] != want["verdict"]:
                verdicts.append(f"{key}: {want['verdict']} -> {got['verdict']}")
    finally:
        store.close()
        db.unlink()
    return checked, moved, explained, verdicts


def main(folders: list[Path]) -> int:
    failed = False
    with tempfile.TemporaryDirectory() as t:
        for folder in folders:
            if not (folder / "sweep.json").is_file() or not (
                (folder / "sweep.db").is_file() or (folder / "sweep.db.xz").is_file()
            ):
                continue
            checked, moved, explained, verdicts = check(folder, Path(t))
            print(
                f"{folder.name}: {checked} runs, {len(moved)} figures moved, "
                f"{len(explained)} moved for a stated reason, {len(verdicts)} verdicts changed"
            )
            for line in moved + explained + verdicts:
                print(f"  {line}")
            failed = failed or bool(moved)
    return 1 if failed else 0


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:]] or sorted(p for p in ROOT.iterdir() if p.is_dir())
    sys.exit(main(args))
