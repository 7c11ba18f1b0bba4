"""The MoE write-up's tables (docs/results/h200/moe/README.md), from committed files only.

    PYTHONPATH=src python scripts/h200/moe_tables.py [predict|dense|roofline|all]

* ``predict``: the advisor's prediction (``moe/prediction.json``, committed before the
  sweep) beside the measurement (``moe/sweep.json``): decode step vs ITL p50, total tok/s.
* ``dense``: how much one engine leads another on the dense Llama-3-8B shape
  (``vllm-a`` for vLLM and llama.cpp, ``sglang-a`` for SGLang) and on the MoE shape, level
  by level. A lead is A's total tok/s over B's; with two repeats each there are four
  repeat pairings and the interval printed is their min-max. "grows"/"shrinks" is said only
  where the dense and MoE intervals do not overlap and their midpoints differ by more than
  3% (two repeats give no better test; a smaller shift is reported as "no clear change").
* ``roofline``: the measured TPOT p50 against the step bound at every level (for the MoE
  shape the touched-experts bound under uniform routing, ``analysis.roofline``), and the
  dense shape's fraction beside it.

Every figure is a valid run's summary; nothing is fitted here.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from itertools import product
from pathlib import Path

from crossover.analysis.roofline import check_sweep
from crossover.analysis.schema import SweepFile

R = Path("docs/results/h200")
MOE = R / "moe" / "sweep.json"
VA, SA = R / "vllm-a" / "sweep.json", R / "sglang-a" / "sweep.json"
MOE_TARGET = {"vLLM BF16": "vllm", "llama.cpp": "llamacpp-q8", "SGLang BF16": "sglang"}
# pair -> the dense (sweep, target) of each side and whether the dense ratio crosses sessions
# (vllm-a: vLLM and llama.cpp F16 measured together; sglang-a: SGLang and vLLM together)
PAIRS = [
    ("vLLM BF16", "llama.cpp", (VA, "vllm"), (VA, "llamacpp-graphs-nocache"), False),
    ("SGLang BF16", "llama.cpp", (SA, "sglang"), (VA, "llamacpp-graphs-nocache"), True),
    ("vLLM BF16", "SGLang BF16", (SA, "vllm"), (SA, "sglang"), False),
]


def valid(path: Path, target: str) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for r in json.loads(path.read_text(encoding="utf-8"))["runs"]:
        s = r.get("summary") or {}
        if r["target"] == target and s.get("verdict") == "valid":
            out[r["concurrency"]].append(s)
    return out


def rng(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    a, b = fmt.format(lo), fmt.format(hi)
    return a if a == b else f"{a}–{b}"


def tok(s: dict) -> float:
    return float(s["throughput"]["total_tokens_per_s"])


def itl(s: dict) -> float:
    return float(s["itl_ms"]["p50"])


def predict() -> None:
    pred = json.loads((R / "moe" / "prediction.json").read_text(encoding="utf-8"))
    print("| target | c | predicted step ms | measured ITL p50 ms | error | predicted total tok/s "
          "| measured total tok/s | error |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in pred["rows"]:
        runs = valid(MOE, row["target"]).get(row["concurrency"], [])
        if not runs:
            m = "not measured"
            print(f"| {row['target']} | {row['concurrency']} | {row['step_ms']:.2f} | {m} | | "
                  f"{row['total_tok_s']:,.0f} | {m} | |")  # fmt: skip
            continue
        i = sum(map(itl, runs)) / len(runs)
        t = sum(map(tok, runs)) / len(runs)
        print(
            f"| {row['target']} | {row['concurrency']} | {row['step_ms']:.2f} | "
            f"{rng([itl(s) for s in runs], '{:.2f}')} | {(row['step_ms'] / i - 1):+.0%} | "
            f"{row['total_tok_s']:,.0f} | {rng([tok(s) for s in runs], '{:,.0f}')} | "
            f"{(row['total_tok_s'] / t - 1):+.0%} |"
        )


def lead(a: list[dict], b: list[dict]) -> tuple[float, float]:
    ratios = [tok(x) / tok(y) for x, y in product(a, b)]
    return min(ratios), max(ratios)


def dense() -> None:
    for a, b, (pa, ta), (pb, tb), cross in PAIRS:
        ma, mb = valid(MOE, MOE_TARGET[a]), valid(MOE, MOE_TARGET[b])
        da, db = valid(pa, ta), valid(pb, tb)
        levels = sorted(set(ma) & set(mb) & set(da) & set(db))
        where = f"dense: {pa.parent.name}:{ta} over {pb.parent.name}:{tb}"
        if cross:
            where += ", two sessions: the dense ratio carries the day-to-day drift"
        print(f"\n{a} over {b} (total tok/s, min-max over repeat pairings; {where})\n")
        print("| c | dense Llama-3-8B | MoE Qwen3-30B-A3B | on MoE the lead |")
        print("|---:|---:|---:|---|")
        for c in levels:
            d, m = lead(da[c], db[c]), lead(ma[c], mb[c])
            shift = (m[0] + m[1]) / (d[0] + d[1]) - 1
            verdict = "no clear change"
            if abs(shift) > 0.03 and (m[0] > d[1] or m[1] < d[0]):
                verdict = f"{'grows' if shift > 0 else 'shrinks'} ({shift:+.0%})"
            print(f"| {c} | {d[0]:.2f}–{d[1]:.2f}x | {m[0]:.2f}–{m[1]:.2f}x | {verdict} |")


def roofline() -> None:
    def levels(path: Path) -> dict[str, dict[int, tuple[float, float | None, float | None]]]:
        out: dict[str, dict[int, tuple[float, float | None, float | None]]] = {}
        for chk in check_sweep(SweepFile.read(path)):
            out[chk.target] = {
                lv.concurrency: (lv.bound_step_ms, lv.measured_tpot_ms, lv.fraction)
                for lv in chk.levels
            }
        return out

    moe = levels(MOE)
    dense = {**levels(R / "vllm-a" / "sweep.json"), **{
        f"sglang@{k}": v for k, v in levels(R / "sglang-a" / "sweep.json").items()}}  # fmt: skip
    print("| c | touched experts /layer | MoE bound step ms | vLLM TPOT ms (fraction) "
          "| SGLang | llama.cpp Q8_0 bound; TPOT (fraction) | dense vLLM fraction |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    from crossover.analysis.roofline import touched_experts

    for c in sorted(moe.get("vllm", {})):
        b, v, fv = moe["vllm"][c]
        sg = moe.get("sglang", {}).get(c)
        lq = moe.get("llamacpp-q8", {}).get(c)
        dv = dense.get("vllm", {}).get(c)

        def frac(x: tuple[float, float | None, float | None] | None, bound: bool = False) -> str:
            if x is None or x[1] is None or x[2] is None:
                return "–"
            head = f"{x[0]:.2f}; " if bound else ""
            return f"{head}{x[1]:.2f} ({x[2]:.0%})"

        print(
            f"| {c} | {touched_experts(128, 8, c):.1f} | {b:.2f} | {frac((b, v, fv))} | "
            f"{frac(sg)} | {frac(lq, bound=True)} | "
            f"{'–' if dv is None or dv[2] is None else f'{dv[2]:.0%}'} |"
        )


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    for name, fn in (("predict", predict), ("dense", dense), ("roofline", roofline)):
        if what in (name, "all"):
            print(f"\n## {name}\n")
            fn()
