"""The advice as terminal text: the ranked table (``crossover advise``), the full account
(``--explain``), the near misses and what ``--emit-sweep`` wrote. Lines, not output: the
CLI prints them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crossover.advise import traits
from crossover.advise.formats import kernel_table
from crossover.advise.sweep_config import EmittedSweep
from crossover.words import plural

# Cited by every kept candidate: the terminal leaves them out of the per-line titles.
_EVERYWHERE = {
    "seed-2-kernel-check",
    "memory-fit",
    "seed-6-rerun-sweep",
    "calibrated-profile",
    "quant-format-quality",
}


def _titles(rules: list[dict[str, str]], limit: int = 3) -> str:
    shown = [r.get("title") or r["id"] for r in rules if r["id"] not in _EVERYWHERE]
    return "; ".join(shown[:limit])


def _legend(advice: dict[str, Any]) -> list[str]:
    """Each cited rule once: title, then where it comes from (the id is in the JSON)."""
    seen: dict[str, dict[str, str]] = {}
    for rec in advice["recommendations"]:
        for r in rec["rules"]:
            seen.setdefault(r["id"], r)
    for row in advice["rejected"]:
        seen.setdefault(
            row["rule"], {"title": row.get("title") or row["rule"], "source": row.get("source", "")}
        )
    return [f"  {r.get('title')}: {r.get('source')}" for r in seen.values()]


def _figures(rec: dict[str, Any]) -> str:
    fig = rec["measured"] if rec["figures_from"] == "measured" else rec["predicted"]
    per_user, out = fig.get("decode_tok_s_per_user"), fig.get("output_tok_s")
    text = f"{per_user:7.0f} decode tok/s/user " if per_user else "        - decode tok/s/user "
    text += f"{out:8.0f} output tok/s " if out else "         - output tok/s "
    if rec["figures_from"] == "measured":
        return text + f"(measured: {rec['measured']['target']})"
    if rec["ranked_by"]["scale"] is not None:
        return text + f"(roofline; ranked at {rec['ranked_by']['value']:.0f})"
    profile = rec["predicted"].get("profile")
    basis = rec.get("basis") or {}
    if basis.get("kind") == "borrowed":
        lent = rec.get("borrowed_rank") or {}
        bits = []
        if lent.get("after"):
            bits.append(f"would rank #{lent['rank_if_it_holds']}")
        if lent.get("above"):
            bits.append(f"would lead {lent['above']} by {lent['lead_pct']:.0f}%")
        holds = f"; {' and '.join(bits)} if it holds" if bits else ""
        return text + f"(estimate: {basis['label']}{holds})"
    if basis.get("kind") == "calibrated":
        return text + f"(estimate: {profile} profile, {basis['label']})"
    return text + (f"(estimate: {profile} profile)" if profile else "(roofline)")


_TOP_ROWS = 6
_COL = 17  # a figure column's width: "c=1024 out tok/s" and a space


def _formats(model: dict[str, Any]) -> str:
    if model.get("quant"):
        return str(model["quant"])
    names = dict.fromkeys(q for qs in (model.get("formats") or {}).values() for q in qs)
    return "formats with kernels here: " + ", ".join(names)


def _cell(rec: dict[str, Any]) -> str:
    """ "#1   817", "#3  ~874" (borrowed estimate), "#1  271=" (measured)."""
    key = "decode_tok_s_per_user" if rec["regime"] == "low" else "output_tok_s"
    fig = rec["measured"] if rec["figures_from"] == "measured" else rec["predicted"]
    value = fig.get(key) or 0.0
    mark = "~" if (rec.get("basis") or {}).get("kind") == "borrowed" else ""
    end = "=" if rec["figures_from"] == "measured" else " "
    return f"#{rec['rank']:<2}{mark + format(value, '.0f'):>7}{end}"


def _header(advice: dict[str, Any]) -> list[str]:
    hw, model, work = advice["hardware"], advice["model"], advice["workload"]
    moe = f", MoE {model['experts']}x{model['experts_per_token']}" if model.get("experts") else ""
    # the link between GPUs: one GPU has none to name (an H100 PCIe or an RTX 3090 alone
    # read "(nvlink)" from its table row's bridge)
    link = f" ({hw['interconnect']})" if hw["count"] > 1 else ""
    return [
        f"{hw['count']}x {hw['gpu']}{link}, {model['name']} "
        f"{model['params'] / 1e9:.1f}B{moe}, {work['input_tokens']} in + "
        f"{work['output_tokens']} out tokens; {_formats(model)}",
        *_assumed(hw),
    ]


def _assumed(hw: dict[str, Any]) -> list[str]:
    """The line under the header that says which of the machine's GPUs NVML's reading
    planned for and why (``CUDA_VISIBLE_DEVICES``); nothing for GPUs named by flags."""
    said = hw.get("gpus_assumed")
    return [f"local GPUs: {said}"] if said else []


def table_lines(advice: dict[str, Any]) -> list[str]:
    """One ranked table (a row per engine, format and layout; a column per load) and one
    line of reasons per row; ``--explain`` prints the rules and their sources."""
    out: list[str] = []
    add = out.append
    out.extend(_header(advice))
    recs = advice["recommendations"]
    regimes = list(advice["workload"]["regimes"].items())
    rows: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for rec in recs:
        key = (rec["engine"], *sorted(rec["config"].items()))
        rows.setdefault(key, {})[rec["regime"]] = rec
    if not rows:
        add("no candidate fits or runs")
        out += near_miss_lines(advice)
    else:
        cols = "".join(
            f"{f'c={c} ' + ('tok/s/user' if r == 'low' else 'out tok/s'):>{_COL}}"
            for r, c in regimes
        )
        add(f"  {'engine  format  layout':<30}{cols}   quality cost")
    ordered = sorted(
        rows.items(),
        key=lambda kv: (
            min(r["rank"] for r in kv[1].values()),
            sum(kv[1][r]["rank"] if r in kv[1] else 99 for r, _ in regimes),
        ),
    )
    # each engine's best row first among equals, so every engine that fits is in the table
    best_of: dict[str, tuple[Any, ...]] = {}
    for key, _ in ordered:
        best_of.setdefault(key[0], key)
    keep = set(best_of.values())
    for key, _ in ordered:
        if len(keep) >= max(_TOP_ROWS, len(best_of)):
            break
        keep.add(key)
    listed = [(k, by) for k, by in ordered if k in keep]
    for key, by in listed:
        name = _row_name(key[0], dict(key[1:]))
        cells = "".join(f"{_cell(by[r]) if r in by else '-':>{_COL}}" for r, _ in regimes)
        first = next(iter(by.values()))
        fmt = first.get("quality") or {}
        cost = str(fmt.get("cost", "-")).split()[0].rstrip(":")
        cost += "" if fmt.get("measured") or not fmt.get("rank") else "*"
        add(f"  {name:<30}{cells}   {cost}")
        heads = dict.fromkeys(h for r, _ in regimes if r in by for h in by[r]["headline"])
        ranked_above = [h for h in heads if h.startswith("ranked above")]
        for h in ranked_above[1:]:  # the first says why; the other loads' repeat it
            del heads[h]
        if heads:
            add(f"      {'; '.join(heads)}")
    if len(ordered) > len(listed):
        add(f"  ... {len(ordered) - len(listed)} more ranked rows: --explain, --json")
        closest = _least_loss(ordered, listed, regimes)
        if closest:
            add(f"  {closest}")
    out.extend(_footer(advice))
    return out


def _least_loss(
    ordered: list[tuple[tuple[Any, ...], dict[str, dict[str, Any]]]],
    listed: list[tuple[tuple[Any, ...], dict[str, dict[str, Any]]]],
    regimes: list[tuple[str, int]],
) -> str | None:
    """Where every listed row loses quality (a 4-bit format, say), the best-ranked row
    that loses little or none, in one line: the choice the table would otherwise hide."""

    def loss(by: dict[str, dict[str, Any]]) -> int:
        return int(next(iter(by.values()))["quality"]["rank"])

    if any(loss(by) <= 1 for _, by in listed):
        return None
    best = next(((k, by) for k, by in ordered if loss(by) <= 1), None)
    if best is None:
        return None
    key, by = best
    cells = ", ".join(f"c={c} {' '.join(_cell(by[r]).split())}" for r, c in regimes if r in by)
    cost = str(next(iter(by.values()))["quality"]["cost"])
    return f"least quality loss: {_row_name(key[0], dict(key[1:]))}: {cells} ({cost})"


_LAYOUT_KEYS = {"tp", "pp", "gpus", "quant", "cuda_graphs", "split_mode"}


def _row_name(engine: str, cfg: dict[str, Any]) -> str:
    """ "vllm fp8 tp=2", "llamacpp gguf-q4_k_m split=2"; other settings as key=value."""
    tp, pp = cfg["tp"], cfg["pp"]
    if traits.of(engine).layer_split:
        layout = f"split={pp}" if pp > 1 else "1 GPU"
    else:
        layout = f"tp={tp}" + (f" pp={pp}" if pp > 1 else "")
    extra = [f"{k}={v}" for k, v in sorted(cfg.items()) if k not in _LAYOUT_KEYS and v]
    return " ".join([engine, str(cfg["quant"]), layout, *extra])


def _footer(advice: dict[str, Any]) -> list[str]:
    rejected = [r for r in advice["rejected"] if not r.get("not_asked")]
    skipped = len(advice["rejected"]) - len(rejected)
    by_rule: dict[str, int] = {}
    for row in rejected:
        by_rule[row["rule"]] = by_rule.get(row["rule"], 0) + 1
    what = ", ".join(f"{n} {rule}" for rule, n in sorted(by_rule.items(), key=lambda kv: -kv[1]))
    parts = [
        "#rank at each load; ~ borrowed estimate, ranked by its low end; = measured; "
        "else estimated from the engine's profile; * quality cost cited",
        (f"rejected {len(rejected)} ({what}); " if rejected else "")
        + (f"{skipped} formats without kernels here left out; " if skipped else "")
        + "reasons, rules, sources: --explain; a prediction is a hypothesis: measure it "
        "(--emit-sweep)",
    ]
    return [p for p in parts if p]


def _kernel_table(advice: dict[str, Any]) -> list[str]:
    """Which weight formats have kernels on this GPU's SM, per engine, with the source
    (rules.yaml kernels; rule seed-2-kernel-check)."""
    fam = advice["hardware"]["sm_family"]
    return [
        f"{engine}: {', '.join(ok) or '-'}"
        + (f"; none for {', '.join(no)}" if no else "")
        + f" ({source})"
        for engine, ok, no, source in kernel_table(fam)
    ]


def near_miss_lines(advice: dict[str, Any]) -> list[str]:
    """The best rejected configuration per engine: what it lacks and what would fit."""
    out: list[str] = []
    add = out.append
    misses = advice.get("near_misses") or []
    if misses:
        add("near misses (the best rejected configuration per engine):")
    for miss in misses:
        cfg = miss["config"]
        if miss["short_gib"] is not None:
            what = (
                f"needs {miss['needs_gib_per_gpu']:.1f} GiB per GPU, "
                f"{miss['usable_gib_per_gpu']:.1f} usable: {miss['short_gib']:.1f} GiB short"
            )
        else:
            what = miss["reason"]
        fixes = "; ".join(miss["fits_with"])
        add(
            f"  {miss['engine']} tp={cfg['tp']} pp={cfg['pp']} {cfg['quant']} ({cfg['gpus']} GPU): "
            f"{what}" + (f"; {fixes}" if fixes else "")
        )
    return out


def explain_lines(advice: dict[str, Any]) -> list[str]:
    """``--explain``: every ranked row with its rules, the rejected candidates, the near
    misses, the notes, every rule's source and the kernel table for this GPU."""
    out: list[str] = []
    add = out.append
    hw, model = advice["hardware"], advice["model"]
    add(
        f"{hw['count']}x {hw['gpu']} ({hw['interconnect']}), {model['name']} "
        f"{model['params'] / 1e9:.2f}B params, formats {_formats(model)}; "
        f"figures: decode tok/s per user and output tok/s (all users), "
        f"{advice['predictions']} predictions"
    )
    out.extend(_assumed(hw))
    for rec in advice["recommendations"]:
        cfg = rec["config"]
        layout = f"tp={cfg['tp']} pp={cfg['pp']}"
        add(
            f"  {rec['regime']:>4} c={rec['concurrency']:<4} #{rec['rank']} "
            f"{rec['engine']:<12} {cfg['quant']:<12} {layout}  {_figures(rec)}  "
            f"[{_titles(rec['rules'])}]"
        )
        for reason in rec["reasons"]:
            add(f"        {reason}")
    shown: set[str] = set()
    rejected = advice["rejected"]
    if rejected:
        add(f"rejected {len(rejected)} candidates, e.g.:")
    for row in rejected:
        key = f"{row['engine']}:{row['config']['quant']}:{row['rule']}"
        if key not in shown:
            shown.add(key)
            cfg = row["config"]
            title = row.get("title") or row["rule"]
            add(
                f"  {row['engine']} {cfg['quant']} tp={cfg['tp']} pp={cfg['pp']}: "
                f"{row['reason']} [{title}]"
            )
    out += near_miss_lines(advice)
    for note in advice["notes"]:
        add(f"note: {note}")
    legend = _legend(advice)
    if legend:
        add("rules (title: source):")
        for line in legend:
            add(line)
    add(f"kernels on {hw['gpu']} ({hw['compute_capability']}), per engine and format:")
    for line in _kernel_table(advice):
        add(f"  {line}")
    for cmp in advice["comparisons"]:
        err = cmp["error_pct"].get("output_tok_s")
        if err is not None:
            add(
                f"measured {cmp['target']} c={cmp['concurrency']}: prediction error {err:+.0f}% "
                "(output tok/s)"
            )
    cal = advice.get("calibration")
    if cal is not None:
        mae = cal["mean_abs_error_pct"]
        add(
            f"calibration: {plural(cal['n'], 'row')} (output tok/s and decode tok/s/user), "
            "mean |error| "
            + (f"{mae:.1f}%" if mae is not None else "-")
            + "; "
            + ", ".join(f"{k} {v:.1f}%" for k, v in cal["per_engine"].items())
        )
        if cal["worst"]:
            w = cal["worst"]
            add(
                f"calibration: worst regime {w['profile']} at {w['regime']} "
                f"({w['mean_abs_error_pct']:.1f}% over {plural(w['n'], 'row')})"
            )
        const = cal.get("constants")
        if const and const["in_sample"]:
            held = const["heldout_mean_abs_error_pct"]
            add(
                "calibration: these runs are among those the constants were fitted to; "
                "held out, the mean |error| was " + (f"{held:.1f}%" if held is not None else "-")
            )
    return out


def emitted_lines(out: Path, config: EmittedSweep) -> list[str]:
    """What ``--emit-sweep`` wrote: the file, its targets, the candidates left out and
    the notes on the model files."""
    lines = [f"sweep config: {out} ({plural(len(config.targets), 'target')})"]
    lines += [f"  left out {line}" for line in config.left_out]
    lines += [f"  note: {line}" for line in config.notes]
    return lines
