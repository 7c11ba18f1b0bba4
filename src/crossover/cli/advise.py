"""``crossover advise``: ranked engine/parallelism candidates per load regime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from crossover.cli.common import check_output_file, parse_list, parse_names, write_output
from crossover.errors import UsageError
from crossover.words import plural


def parse_versions(text: str | None) -> dict[str, str]:
    from crossover.advise import traits
    from crossover.advise.rules import ENGINES, version_key

    out: dict[str, str] = {}
    for item in parse_names(text, "--engine-versions") if text is not None else []:
        name, sep, version = item.partition("=")
        engine = traits.canonical(name)
        if not sep or engine not in ENGINES or not version.strip():
            raise UsageError(
                f"--engine-versions wants ENGINE=VERSION[,...] with ENGINE in "
                f"{', '.join(ENGINES)}; got {item!r}"
            )
        version_key(version)
        out[engine] = version.strip()
    return out


def parse_engines(text: str) -> list[str]:
    from crossover.advise.rules import ENGINES

    names = parse_names(text, "--engines", lower=True)
    bad = [n for n in names if n not in ENGINES]
    if bad:
        raise UsageError(f"--engines wants a comma list of {', '.join(ENGINES)}; got {text!r}")
    return names


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


def _header(advice: dict[str, Any]) -> str:
    hw, model, work = advice["hardware"], advice["model"], advice["workload"]
    moe = f", MoE {model['experts']}x{model['experts_per_token']}" if model.get("experts") else ""
    # the link between GPUs: one GPU has none to name (an H100 PCIe or an RTX 3090 alone
    # read "(nvlink)" from its table row's bridge)
    link = f" ({hw['interconnect']})" if hw["count"] > 1 else ""
    return (
        f"{hw['count']}x {hw['gpu']}{link}, {model['name']} "
        f"{model['params'] / 1e9:.1f}B{moe}, {work['input_tokens']} in + "
        f"{work['output_tokens']} out tokens; {_formats(model)}"
    ) + _assumed(hw)


def _assumed(hw: dict[str, Any]) -> str:
    """The line under the header that says which of the machine's GPUs NVML's reading
    planned for and why (``CUDA_VISIBLE_DEVICES``); nothing for GPUs named by flags."""
    said = hw.get("gpus_assumed")
    return f"\nlocal GPUs: {said}" if said else ""


def _print(advice: dict[str, Any]) -> None:
    """One ranked table (a row per engine, format and layout; a column per load) and one
    line of reasons per row; ``--explain`` prints the rules and their sources."""
    echo = typer.echo
    echo(_header(advice))
    recs = advice["recommendations"]
    regimes = list(advice["workload"]["regimes"].items())
    rows: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for rec in recs:
        key = (rec["engine"], *sorted(rec["config"].items()))
        rows.setdefault(key, {})[rec["regime"]] = rec
    if not rows:
        echo("no candidate fits or runs")
        _print_near_misses(advice)
    else:
        cols = "".join(
            f"{f'c={c} ' + ('tok/s/user' if r == 'low' else 'out tok/s'):>{_COL}}"
            for r, c in regimes
        )
        echo(f"  {'engine  format  layout':<30}{cols}   quality cost")
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
        echo(f"  {name:<30}{cells}   {cost}")
        heads = dict.fromkeys(h for r, _ in regimes if r in by for h in by[r]["headline"])
        ranked_above = [h for h in heads if h.startswith("ranked above")]
        for h in ranked_above[1:]:  # the first says why; the other loads' repeat it
            del heads[h]
        if heads:
            echo(f"      {'; '.join(heads)}")
    if len(ordered) > len(listed):
        echo(f"  ... {len(ordered) - len(listed)} more ranked rows: --explain, --json")
        closest = _least_loss(ordered, listed, regimes)
        if closest:
            echo(f"  {closest}")
    echo(_footer(advice))


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
    from crossover.advise import traits

    tp, pp = cfg["tp"], cfg["pp"]
    if traits.of(engine).layer_split:
        layout = f"split={pp}" if pp > 1 else "1 GPU"
    else:
        layout = f"tp={tp}" + (f" pp={pp}" if pp > 1 else "")
    extra = [f"{k}={v}" for k, v in sorted(cfg.items()) if k not in _LAYOUT_KEYS and v]
    return " ".join([engine, str(cfg["quant"]), layout, *extra])


def _footer(advice: dict[str, Any]) -> str:
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
    return "\n".join(p for p in parts if p)


def _kernel_table(advice: dict[str, Any]) -> list[str]:
    """Which weight formats have kernels on this GPU's SM, per engine, with the source
    (rules.yaml kernels; rule seed-2-kernel-check)."""
    from crossover.advise.formats import kernel_table

    fam = advice["hardware"]["sm_family"]
    return [
        f"{engine}: {', '.join(ok) or '-'}"
        + (f"; none for {', '.join(no)}" if no else "")
        + f" ({source})"
        for engine, ok, no, source in kernel_table(fam)
    ]


def _print_near_misses(advice: dict[str, Any]) -> None:
    echo = typer.echo
    misses = advice.get("near_misses") or []
    if misses:
        echo("near misses (the best rejected configuration per engine):")
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
        echo(
            f"  {miss['engine']} tp={cfg['tp']} pp={cfg['pp']} {cfg['quant']} ({cfg['gpus']} GPU): "
            f"{what}" + (f"; {fixes}" if fixes else "")
        )


def _print_explain(advice: dict[str, Any]) -> None:
    """``--explain``: every ranked row with its rules, the rejected candidates, the near
    misses, the notes, every rule's source and the kernel table for this GPU."""
    echo = typer.echo
    hw, model = advice["hardware"], advice["model"]
    echo(
        f"{hw['count']}x {hw['gpu']} ({hw['interconnect']}), {model['name']} "
        f"{model['params'] / 1e9:.2f}B params, formats {_formats(model)}; "
        f"figures: decode tok/s per user and output tok/s (all users), "
        f"{advice['predictions']} predictions" + _assumed(hw)
    )
    for rec in advice["recommendations"]:
        cfg = rec["config"]
        layout = f"tp={cfg['tp']} pp={cfg['pp']}"
        echo(
            f"  {rec['regime']:>4} c={rec['concurrency']:<4} #{rec['rank']} "
            f"{rec['engine']:<12} {cfg['quant']:<12} {layout}  {_figures(rec)}  "
            f"[{_titles(rec['rules'])}]"
        )
        for reason in rec["reasons"]:
            echo(f"        {reason}")
    shown: set[str] = set()
    rejected = advice["rejected"]
    if rejected:
        echo(f"rejected {len(rejected)} candidates, e.g.:")
    for row in rejected:
        key = f"{row['engine']}:{row['config']['quant']}:{row['rule']}"
        if key not in shown:
            shown.add(key)
            cfg = row["config"]
            title = row.get("title") or row["rule"]
            echo(
                f"  {row['engine']} {cfg['quant']} tp={cfg['tp']} pp={cfg['pp']}: "
                f"{row['reason']} [{title}]"
            )
    _print_near_misses(advice)
    for note in advice["notes"]:
        echo(f"note: {note}")
    legend = _legend(advice)
    if legend:
        echo("rules (title: source):")
        for line in legend:
            echo(line)
    echo(f"kernels on {hw['gpu']} ({hw['compute_capability']}), per engine and format:")
    for line in _kernel_table(advice):
        echo(f"  {line}")
    for cmp in advice["comparisons"]:
        err = cmp["error_pct"].get("output_tok_s")
        if err is not None:
            echo(
                f"measured {cmp['target']} c={cmp['concurrency']}: prediction error {err:+.0f}% "
                "(output tok/s)"
            )
    cal = advice.get("calibration")
    if cal is not None:
        mae = cal["mean_abs_error_pct"]
        echo(
            f"calibration: {plural(cal['n'], 'row')} (output tok/s and decode tok/s/user), "
            "mean |error| "
            + (f"{mae:.1f}%" if mae is not None else "-")
            + "; "
            + ", ".join(f"{k} {v:.1f}%" for k, v in cal["per_engine"].items())
        )
        if cal["worst"]:
            w = cal["worst"]
            echo(
                f"calibration: worst regime {w['profile']} at {w['regime']} "
                f"({w['mean_abs_error_pct']:.1f}% over {plural(w['n'], 'row')})"
            )
        const = cal.get("constants")
        if const and const["in_sample"]:
            held = const["heldout_mean_abs_error_pct"]
            echo(
                "calibration: these runs are among those the constants were fitted to; "
                "held out, the mean |error| was " + (f"{held:.1f}%" if held is not None else "-")
            )


def advise_command(
    model: str = typer.Option(
        ..., "--model", help="HF config.json or folder, GGUF, or a known name"
    ),
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help="GPU name as `crossover gpus` lists it (exact: RTX-4090-Laptop, "
        "'NVIDIA GeForce RTX 4090 Laptop GPU'), or local (NVML; the default without --gpu-spec)",
    ),
    gpu_spec: str | None = typer.Option(
        None,
        "--gpu-spec",
        help="describe a GPU: memory=16GiB,bandwidth=576GB/s,bf16=82,fp8=165,fp4=..,arch=sm89 "
        "(dense TFLOPS); alone for a GPU the table lacks, beside --gpu to replace its figures",
    ),
    gpus: int = typer.Option(1, "--gpus", help="number of GPUs"),
    interconnect: str | None = typer.Option(
        None, "--interconnect", help="nvlink|pcie|pcie-no-p2p|tcp"
    ),
    quant: str | None = typer.Option(
        None,
        "--quant",
        help="narrow the weight formats, one or a comma list: bf16,fp8,fp8-block,nvfp4,"
        "int4-awq,gguf-q4_k_m,... (default: every format each engine has kernels for here)",
    ),
    engine_versions: str | None = typer.Option(
        None, "--engine-versions", help="e.g. trtllm=1.2.1,vllm=0.26.0"
    ),
    input_tokens: int = typer.Option(512, "--input-tokens"),
    output_tokens: int = typer.Option(256, "--output-tokens"),
    shared_prefix_tokens: int = typer.Option(
        0,
        "--shared-prefix-tokens",
        help="the start of every prompt that other requests share (a system prompt): engines "
        "with a prefix cache (vLLM, SGLang, TensorRT-LLM, a llama.cpp slot) skip its prefill",
    ),
    concurrency: str = typer.Option("1,8,64", "--concurrency"),
    results: Path | None = typer.Option(None, "--results", help="sweep dir with sweep.json"),
    allreduce_table: Path | None = typer.Option(
        None, "--allreduce-table", help="measured all-reduce JSON [{size_bytes, latency_us}]"
    ),
    engines: str | None = typer.Option(
        None, "--engines", help="consider only these, e.g. llamacpp,vllm (default: all)"
    ),
    reserve_gib: str | None = typer.Option(
        None,
        "--reserve-gib",
        help="GiB per GPU for everything besides weights and KV, replacing the engines' "
        "measured overheads: 1.5, or llamacpp=0.8,vllm=2",
    ),
    host_mem_bandwidth: str | None = typer.Option(
        None,
        "--host-mem-bandwidth",
        help="host memory bandwidth for llama.cpp's CPU expert offload (--n-cpu-moe): GB/s "
        "(DDR5-4800 x 2 channels: 76.8) or ddr5-dual, ddr5-dual-4800, ddr4-dual, ddr5-8ch "
        "(default: ddr5-dual, said in the row)",
    ),
    roofline: bool = typer.Option(
        False, "--roofline", help="rank by roofline upper bounds instead of calibrated estimates"
    ),
    calibration_path: Path | None = typer.Option(
        None,
        "--calibration",
        help="engine profiles fitted by python -m crossover.advise.calibrate (default: packaged)",
    ),
    explain: bool = typer.Option(
        False, "--explain", help="every ranked row's reasons, the rules and their sources"
    ),
    json_path: Path | None = typer.Option(None, "--json", help="write the advice JSON here"),
    emit_sweep_path: Path | None = typer.Option(
        None,
        "--emit-sweep",
        help="write a sweep config for the top candidates (it passes crossover sweep --check; "
        "needs the model's files: --model as a path, or --model-path)",
    ),
    model_path: list[str] | None = typer.Option(
        None,
        "--model-path",
        help="with --emit-sweep: the files each engine loads, a GGUF file (llama.cpp) and/or "
        "an HF folder or hub id ORG/NAME (vLLM, SGLang, TensorRT-LLM, transformers); repeat",
    ),
) -> None:
    """Rank engines and TP/PP layouts per load regime, with reasons and cited rules."""
    import json

    from crossover.advise import (
        AdviceRequest,
        advise,
        load_calibration,
        load_curve,
        load_model,
        load_results,
    )
    from crossover.advise.cost import host_bandwidth
    from crossover.advise.hardware import resolve_system
    from crossover.advise.memory import parse_reserve

    if model_path and emit_sweep_path is None:  # before the table, not after it
        raise UsageError("--model-path goes with --emit-sweep")
    host_bandwidth(host_mem_bandwidth)  # a bad figure: one line before any work
    system = resolve_system(gpu, gpus, interconnect, gpu_spec)
    request = AdviceRequest(
        system=system,
        model=load_model(model),
        quant=quant,
        engine_versions=parse_versions(engine_versions),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        shared_prefix_tokens=shared_prefix_tokens,
        concurrency=parse_list(concurrency, "--concurrency"),
        reserve_gib=parse_reserve(reserve_gib),
        host_mem_bandwidth=host_mem_bandwidth,
        predictions="roofline" if roofline else "calibrated",
        **({"engines": parse_engines(engines)} if engines else {}),
    )
    if roofline and calibration_path is not None:
        raise UsageError("--roofline and --calibration exclude each other")
    inputs = [Path(model), calibration_path, allreduce_table, results]
    inputs += [results / "sweep.json"] if results is not None else []
    check_output_file(json_path, "--json", keep=inputs)
    check_output_file(emit_sweep_path, "--emit-sweep", keep=[*inputs, json_path])
    cal = load_calibration(calibration_path) if calibration_path else None
    curve = load_curve(allreduce_table) if allreduce_table else None
    sweep = load_results(results) if results else None
    advice = advise(request, curve=curve, results=sweep, calibration=cal)
    (_print_explain if explain else _print)(advice)
    if json_path is not None:
        write_output(json_path, json.dumps(advice, indent=2) + "\n", "--json")
    if emit_sweep_path is not None:
        _emit(advice, model, model_path or [], emit_sweep_path)


def _emit(advice: dict[str, Any], model: str, paths: list[str], out: Path) -> None:
    """Write the sweep config; each engine gets the model file it loads. A known model
    name is not a file: without --model-path the candidates that need one are left out,
    and with none left this is a usage error saying what to give."""
    import shlex
    import sys

    from crossover.advise import emit_sweep
    from crossover.advise.sweep_config import model_files

    if not advice["recommendations"]:
        raise UsageError("--emit-sweep: no candidate fits (rejected above); nothing to measure")
    given = list(paths)
    if Path(model).expanduser().exists():
        given.append(model)
    hf, gguf = model_files(given)
    config = emit_sweep(advice, hf, gguf=gguf)
    if not config.targets:
        raise UsageError(
            f"--emit-sweep: {model!r} names a model, not its files; give --model-path FILE.gguf "
            "(llama.cpp) and/or --model-path HF_FOLDER_OR_ORG/NAME (vLLM, SGLang, TensorRT-LLM, "
            "transformers) so the sweep can launch them"
        )
    command = "crossover " + shlex.join(sys.argv[1:]) if sys.argv[1:] else None
    write_output(out, config.to_yaml(command), "--emit-sweep")
    typer.echo(f"sweep config: {out} ({plural(len(config.targets), 'target')})")
    for line in config.left_out:
        typer.echo(f"  left out {line}")
    for line in config.notes:
        typer.echo(f"  note: {line}")


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover advise --model gemma-3-270m --gpu H200\n"
    "  crossover advise --model qwen3-8b --gpu 'RTX 4090 Laptop'\n"
    "  crossover advise --model qwen3-8b \\\n"
    "      --gpu-spec memory=16GiB,bandwidth=576GB/s,bf16=79,arch=sm89\n"
    "  crossover advise --model llama-3.1-8b --gpu H200 --emit-sweep sweep.yaml \\\n"
    "      --model-path /models/llama-3.1-8b --model-path /models/llama-3.1-8b-f16.gguf\n"
)


def register(app: typer.Typer) -> None:
    app.command("advise", epilog=EXAMPLE)(advise_command)
