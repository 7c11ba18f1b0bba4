"""The MoE tuning sweep's figures (docs/results/h200/moe-tuning/): vLLM's tuned fused-MoE
config against its default tiles, FP8 against BF16, and llama.cpp's CPU expert offload.

    PYTHONPATH=src python scripts/h200/moe_tuning.py docs/results/h200/moe-tuning [--write]

Prints the README's tables (markdown). With ``--write`` it also writes DIR/summary.json,
the machine-readable form the advisor's rules read:

* ``tuned_vs_default``: per dtype and level, default / tuned for TPOT p50, ITL p50 and
  total tokens/s (above 1 for TPOT/ITL: the default tiles are slower; below 1 for tokens/s:
  the default tiles serve less). Each ratio's interval comes from the project's own
  analysis (``crossover.analysis.crossovers.level_diffs``: the difference of the means with
  Welch's 95% interval over the repeats) divided by the tuned mean; ``interval`` is the TPOT
  ratio's. ``*_r1`` is the same ratio from the second repeat alone (the first repeat of
  each vLLM target carries its first-use Triton compiles: TTFT and tokens/s, not decode).
* ``offload``: llama.cpp with ``--n-cpu-moe N`` (0 = all on the GPU, the reference), per
  level: output tokens/s, ITL/TPOT/TTFT p50.
* ``host``: the machine's CPU, memory and PCIe link, and the bandwidths measured there
  (job/host.json, written by scripts/h200/host_facts.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from crossover.analysis.crossovers import level_diffs, level_values, metric_spec
from crossover.analysis.schema import SweepFile

#: (dtype, tuned target, default target, the config each read: from its engine log)
PAIRS = (("bf16", "vllm-bf16", "vllm-bf16-default"),)
#: FP8 against BF16 (both on vLLM's own tiles: the shipped tuned BF16 file, FP8's default)
FP8 = ("vllm-fp8", "vllm-bf16")
#: llama.cpp targets and their --n-cpu-moe (0: every tensor on the GPU)
OFFLOAD = (("llamacpp-q8-gpu", 0), ("llamacpp-q8-cpumoe48", 48), ("llamacpp-q8-cpumoe24", 24))
METRICS = {
    "tpot_p50": "tpot_ms.p50",
    "itl_p50": "itl_ms.p50",
    "total_tps": "total_tokens_per_s",
}


def ratios(sweep: SweepFile, a: str, b: str) -> dict[float, dict[str, Any]]:
    """a / b per level and metric, with the interval of (a - b) / b, over all valid
    repeats and from the second repeat alone."""
    out: dict[float, dict[str, Any]] = {}
    for key, path in METRICS.items():
        spec = metric_spec(path)
        va = level_values(sweep.runs, a, spec.path)
        vb = level_values(sweep.runs, b, spec.path)
        for lv in level_diffs(a, b, va, vb, spec):
            row = out.setdefault(lv.concurrency, {})
            base = lv.mean_b
            row[f"{key}_ratio"] = round(lv.mean_a / base, 4)
            row[f"{key}_interval"] = [
                round(1 + lv.diff.lo / base, 4),
                round(1 + lv.diff.hi / base, 4),
            ]
            row[f"{key}_significant"] = lv.lead is not None
            row[f"{key}_n"] = [lv.n_a, lv.n_b]
            row[f"{key}_means"] = [round(lv.mean_a, 3), round(lv.mean_b, 3)]
        r1a, r1b = second_repeat(sweep, a, spec.path), second_repeat(sweep, b, spec.path)
        for c in set(r1a) & set(r1b):
            out.setdefault(c, {})[f"{key}_ratio_r1"] = round(r1a[c] / r1b[c], 4)
    return out


def second_repeat(sweep: SweepFile, target: str, path: str) -> dict[float, float]:
    found: dict[float, float] = {}
    for run in sweep.runs:
        if run.target == target and run.is_valid and run.repeat == 1:
            v = run.value(path)
            if v is not None:
                found[run.level] = v
    return found


def offload_rows(sweep: SweepFile) -> list[dict[str, Any]]:
    rows = []
    for target, n in OFFLOAD:
        for run in sorted(sweep.runs, key=lambda r: r.level):
            if run.target != target or not run.is_valid:
                continue
            rows.append(
                {
                    "n_cpu_moe": n,
                    "target": target,
                    "c": int(run.level),
                    "repeat": run.repeat,
                    "output_tps": _r(run.value("throughput.output_tokens_per_s"), 1),
                    "total_tps": _r(run.value("throughput.total_tokens_per_s"), 1),
                    "itl_p50_ms": _r(run.value("itl_ms.p50"), 2),
                    "tpot_p50_ms": _r(run.value("tpot_ms.p50"), 2),
                    "ttft_p50_ms": _r(run.value("ttft_ms.p50"), 1),
                }
            )
    return rows


#: the Qwen3-30B-A3B shape: experts, experts per token, layers, and the Q8_0 bytes of one
#: expert (gate, up and down: 3 x hidden 2048 x expert FFN 768 weights at 34 bytes per 32)
EXPERTS, ACTIVE, LAYERS = 128, 8, 48
EXPERT_Q8_BYTES = 3 * 2048 * 768 * 34 / 32


def offload_model(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per offload point: the Q8_0 bytes of the experts a batch of c touches in the
    host-resident layers (uniform routing: E x (1 - (1 - k/E)^c) per layer), and those bytes
    over the measured TPOT, the host rate the step implies (an upper bound where some layers
    stay on the GPU)."""
    points = []
    for r in rows:
        if r["n_cpu_moe"] == 0 or r["tpot_p50_ms"] is None:
            continue
        touched = EXPERTS * (1 - (1 - ACTIVE / EXPERTS) ** r["c"])
        host_bytes = touched * r["n_cpu_moe"] * EXPERT_Q8_BYTES
        points.append(
            {
                "n_cpu_moe": r["n_cpu_moe"],
                "c": r["c"],
                "experts_touched_per_layer": round(touched, 1),
                "host_expert_gb_per_step": round(host_bytes / 1e9, 3),
                "tpot_p50_ms": r["tpot_p50_ms"],
                "implied_host_gb_s": round(host_bytes / (r["tpot_p50_ms"] / 1e3) / 1e9, 1),
            }
        )
    return {
        "rule": (
            "decode step = host-resident touched-expert bytes / ~60 GB/s (+ the all-GPU step "
            "time when some layers stay on the GPU): -8% to +16% of the five points"
        ),
        "expert_q8_0_bytes": EXPERT_Q8_BYTES,
        "points": points,
    }


def host(folder: Path) -> dict[str, Any]:
    path = folder / "job" / "host.json"
    if not path.is_file():
        return {}
    h = json.loads(path.read_text())
    cpu, mem, pcie, rates = h["cpu"], h["memory"], h["pcie"], h.get("rates", {})
    return {
        "cpu": cpu["model"],
        "cpu_family_model": family_model(folder / "job" / "host.txt"),
        "cores": cpu["logical_cpus"],
        "threads_per_core": cpu["threads_per_core"],
        "cpu_flags": cpu["flags"],
        "mem_gib": mem["mem_total_gib"],
        "numa_nodes": cpu["numa_nodes"],
        "pcie_gen": pcie["gen_current"],
        "pcie_width": pcie["width_current"],
        "host_read_gb_s": rates.get("host_read_gb_s"),
        "host_copy_gb_s": rates.get("host_copy_gb_s"),
        "h2d_pinned_gb_s": rates.get("h2d_pinned_gb_s"),
        "d2h_pinned_gb_s": rates.get("d2h_pinned_gb_s"),
        "llama_server_threads": 16,
        "source": "job/host.json, job/host.txt (lscpu, free -g, numactl -H, nvidia-smi -q)",
    }


#: Intel family 6 model numbers of the Xeons these machines may have (lscpu's generic name
#: in a VM hides them): 143 Sapphire Rapids, 207 Emerald Rapids, 173 Granite Rapids
XEON_MODELS = {143: "Sapphire Rapids", 207: "Emerald Rapids", 173: "Granite Rapids"}


def family_model(lscpu: Path) -> str | None:
    """lscpu's CPU family and model, with the Xeon generation the model number names."""
    if not lscpu.is_file():
        return None
    text = lscpu.read_text()
    fam = re.search(r"^CPU family:\s*(\d+)", text, re.M)
    mod = re.search(r"^Model:\s*(\d+)", text, re.M)
    if fam is None or mod is None:
        return None
    name = XEON_MODELS.get(int(mod.group(1))) if fam.group(1) == "6" else None
    return f"{fam.group(1)}/{mod.group(1)}" + (f" ({name})" if name else "")


def _r(v: float | None, nd: int) -> float | None:
    return None if v is None else round(v, nd)


def _pct(r: float) -> str:
    return f"{100 * (r - 1):+.1f}%"


def table_ratio(rows: dict[float, dict[str, Any]], a: str, b: str) -> str:
    head = (
        f"| c | TPOT p50 {a} / {b} (interval) | ITL p50 (interval) | total tok/s (interval) "
        "| second repeat only: TPOT, total tok/s |\n|---:|---|---|---|---|\n"
    )
    lines = []
    for c in sorted(rows):
        x = rows[c]
        cells = []
        for key in ("tpot_p50", "itl_p50", "total_tps"):
            lo, hi = x[f"{key}_interval"]
            sig = " **sig.**" if x[f"{key}_significant"] else ""
            cells.append(f"{_pct(x[f'{key}_ratio'])} ({_pct(lo)} to {_pct(hi)}){sig}")
        r1 = f"{_pct(x['tpot_p50_ratio_r1'])}, {_pct(x['total_tps_ratio_r1'])}"
        lines.append(f"| {c:g} | " + " | ".join(cells) + f" | {r1} |")
    return head + "\n".join(lines)


def table_offload(rows: list[dict[str, Any]]) -> str:
    head = (
        "| --n-cpu-moe | c | output tok/s | total tok/s | ITL p50 ms | TPOT p50 ms "
        "| TTFT p50 ms |\n|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    return head + "\n".join(
        f"| {r['n_cpu_moe']} | {r['c']} | {r['output_tps']:,.1f} | {r['total_tps']:,.1f} "
        f"| {r['itl_p50_ms']:.2f} | {r['tpot_p50_ms']:.2f} | {r['ttft_p50_ms']:,.1f} |"
        for r in rows
    )


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("folder", type=Path)
    ap.add_argument("--write", action="store_true", help="write FOLDER/summary.json")
    args = ap.parse_args(argv)
    sweep = SweepFile.read(args.folder / "sweep.json")
    summary: dict[str, Any] = {
        "sweep": str(args.folder / "sweep.json"),
        "notes": (
            "ratio = default / tuned (TPOT, ITL: >1 means the default tiles are slower; "
            "total_tps: <1 means they serve less); interval = the TPOT ratio's 95% interval "
            "(Welch, 2 + 2 repeats, from crossover.analysis level_diffs, divided by the tuned "
            "mean); *_r1 = the second repeat alone (after the first-use Triton compiles)"
        ),
        "tuned_vs_default": [],
        "fp8_vs_bf16_tuned": [],
        "fp8_config": (
            "vLLM 0.26.0 runs online FP8 (quant: fp8, per-tensor) with its TRITON Fp8 MoE "
            "backend and the default config: it ships no "
            "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json (only the block-quant "
            "one, block_shape=[128,128]), so FP8 runs default tiles with or without the H200 "
            "files and one FP8 target measures it (engines/vllm-fp8.log.gz)"
        ),
        "offload": offload_rows(sweep),
        "offload_model": {},
        "host": host(args.folder),
    }
    for dtype, tuned, default in PAIRS:
        rows = ratios(sweep, default, tuned)
        print(f"\n### {dtype}: {default} / {tuned}\n")
        print(table_ratio(rows, default, tuned))
        for c in sorted(rows):
            x = rows[c]
            summary["tuned_vs_default"].append(
                {
                    "dtype": dtype,
                    "c": int(c),
                    "tpot_p50_ratio": x["tpot_p50_ratio"],
                    "total_tps_ratio": x["total_tps_ratio"],
                    "interval": x["tpot_p50_interval"],
                    "tpot_p50_ms": {
                        "tuned": x["tpot_p50_means"][1],
                        "default": x["tpot_p50_means"][0],
                    },
                    "itl_p50_ratio": x["itl_p50_ratio"],
                    "itl_p50_interval": x["itl_p50_interval"],
                    "total_tps_interval": x["total_tps_interval"],
                    "significant": {k: x[f"{k}_significant"] for k in METRICS},
                    "tpot_p50_ratio_r1": x["tpot_p50_ratio_r1"],
                    "total_tps_ratio_r1": x["total_tps_ratio_r1"],
                    "repeats": x["tpot_p50_n"],
                }
            )
    a, b = FP8
    rows = ratios(sweep, a, b)
    print(f"\n### {a} / {b}\n")
    print(table_ratio(rows, a, b))
    for c in sorted(rows):
        x = rows[c]
        summary["fp8_vs_bf16_tuned"].append(
            {
                "c": int(c),
                "tpot_p50_ratio": x["tpot_p50_ratio"],
                "interval": x["tpot_p50_interval"],
                "total_tps_ratio": x["total_tps_ratio"],
                "total_tps_interval": x["total_tps_interval"],
            }
        )
    summary["offload_model"] = offload_model(summary["offload"])
    print("\n### llama.cpp offload\n")
    print(table_offload(summary["offload"]))
    if args.write:
        out = args.folder / "summary.json"
        out.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"\nwritten: {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
