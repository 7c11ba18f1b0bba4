"""``crossover decide``: the answer, not the grid (docs/decide.md). Parsing and output only."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crossover.decide.events import Reasons
from crossover.decide.events import live_events as live_events
from crossover.errors import UsageError

if TYPE_CHECKING:
    from crossover.analysis.schema import SweepFile
    from crossover.decide.model import QuestionKind
    from crossover.decide.state import PolicyConfig
    from crossover.spec.slo import SloTerm


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover decide --config sweep.yaml --out decide1\n"
    "  crossover decide --config sweep.yaml --out decide1 --question lead --at 1,64\n"
    "  crossover decide --config sweep.yaml --out decide1 --question capacity \\\n"
    "      --slo 'ttft_ms.p99<=500'\n"
    "  crossover decide --replay sweep1/sweep.db --json decision.json\n"
    "  crossover decide --replay results/sweep1   # its sweep.db or sweep.db.xz, as kept\n"
)


def register(app: typer.Typer) -> None:
    app.command("decide", epilog=EXAMPLE)(decide)


def parse_slo(text: str) -> SloTerm:
    """``ttft_ms.p99<=500`` (or ``=500``): one SLO term on a compared latency metric."""
    from crossover.spec.slo import parse_slo as parse_terms

    if ">" in text:  # read as part of the statistic's name, "unknown statistic 'p99>'"
        raise UsageError(
            f"--slo {text!r}: an SLO is a ceiling: METRIC<=LIMIT, e.g. ttft_ms.p99<=500"
        )
    try:
        terms = list(parse_terms(text))
    except UsageError as exc:
        why = str(exc).removeprefix("--slo: ")
        raise UsageError(
            f"--slo {text!r}: give METRIC<=LIMIT, e.g. ttft_ms.p99<=500 ({why})"
        ) from None
    if len(terms) != 1:
        raise UsageError(f"--slo {text!r}: give one term, METRIC<=LIMIT")
    _check_metric(terms[0].path, "--slo")
    return terms[0]


def _check_metric(key: str, flag: str) -> None:
    from crossover.analysis.crossovers import METRICS

    keys = [m.key for m in METRICS]
    if key not in keys:
        raise UsageError(f"{flag} {key}: not a compared metric (one of {', '.join(keys)})")


def _kind(text: str) -> QuestionKind:
    if text == "crossover":
        return "crossover"
    if text == "lead":
        return "lead"
    if text == "capacity":
        return "capacity"
    raise UsageError(f"--question {text}: give crossover, lead or capacity")


def decide(
    config: Annotated[
        Path | None, typer.Option(help="Sweep YAML: measure live through the sweep")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Sweep folder (sweep.db, sweep.json) for a live decision"),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            help="Or replay the policy against a finished sweep's database (sweep.db, "
            "or a results folder's sweep.db.xz, or the folder; only read) and compare "
            "with the grid"
        ),
    ] = None,
    question: Annotated[
        str,
        typer.Option(
            help="crossover (where the targets cross), lead (who leads at --at), or capacity "
            "(most concurrency under --slo; concurrency levels only)"
        ),
    ] = "crossover",
    metric: Annotated[
        list[str] | None,
        typer.Option(help="Metric asked about; repeat [default: total_tokens_per_s, ttft_ms.p50]"),
    ] = None,
    target: Annotated[
        list[str] | None, typer.Option(help="Replay: only these targets; repeat")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(help="lead: the levels asked about, e.g. 1,64 (rates: requests/s, 0.5,8)"),
    ] = None,
    slo: Annotated[
        str | None, typer.Option(help="capacity: METRIC<=LIMIT, e.g. ttft_ms.p99<=500")
    ] = None,
    prior: Annotated[
        Path | None,
        typer.Option(
            help="The advisor's forecast JSON (advise.forecast --json): where to look first"
        ),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Write the decision as JSON here (with --check: the plan)"),
    ] = None,
    reference_repeats: Annotated[
        bool,
        typer.Option(
            help="Repeat the first target's levels while its engine is up (fewer engine "
            "starts; off: less measuring time)"
        ),
    ] = True,
    confirm_single_runs: Annotated[
        bool,
        typer.Option(
            help="Repeat a run that alone shows one side of the answer, on a metric whose "
            "repeats have moved by more than 10% (off: less measuring)"
        ),
    ] = True,
    refine_inconclusive: Annotated[
        bool,
        typer.Option(
            help="Also place levels inside inconclusive brackets (the grid's answer there, "
            "at more measuring)"
        ),
    ] = False,
    tie_margin: Annotated[
        float,
        typer.Option(
            help="Means within this share of each other are level at that level: neither a "
            "lead nor a sign change (e.g. 0.03, the analysis's noise floor; default 0: the "
            "sweep analysis's own reading, where any significant gap leads)"
        ),
    ] = 0.0,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Measure at most this share of the grid's measuring time (estimated from "
            "the levels measured, e.g. 0.33); what it leaves unsettled is said, with why"
        ),
    ] = None,
    start_s: Annotated[
        float | None,
        typer.Option(
            help="An engine start's GPU time in seconds: weighed with --budget against what "
            "a measurement can change, and a replay's GPU time per target [replay default: "
            "each target's starts timed in the database, else read from --engine-logs, "
            "else 105, the H200 starts' 1.5-2 min]"
        ),
    ] = None,
    engine_logs: Annotated[
        Path | None,
        typer.Option(
            help="Replay: a folder of the grid's engine logs (NAME.log, .gz too; a sweep's "
            "DIR/engines): each target's start time read back from them where the database "
            "did not time it [default: DIR/engines where the replay reads a sweep folder's "
            "own database]"
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="With --config: check the YAML whole and print the decision's plan (question, "
            "order, first-pass levels); nothing measured",
        ),
    ] = False,
    remote: Annotated[
        bool,
        typer.Option(
            "--remote",
            help="With --check: the config is for another machine (its paths not looked up here)",
        ),
    ] = False,
    live_levels: Annotated[
        bool,
        typer.Option(
            help="Replay: levels as a live decision measures them (whole, or sequential, "
            "stopped at a request's end), not cut at a time budget"
        ),
    ] = False,
    allow_invalid: Annotated[
        bool, typer.Option(help="Live: exit 0 even with invalid runs (as sweep's)")
    ] = False,
) -> None:
    """Measure only what settles the question: who leads, where targets cross, or capacity."""
    from crossover.cli.common import check_output_file, check_tie_margin, parse_list

    kind = _kind(question)
    # a metric or target given twice is asked once (twice, each finding was said twice)
    metrics = list(dict.fromkeys(metric or ["total_tokens_per_s", "ttft_ms.p50"]))
    target = list(dict.fromkeys(target)) if target else target
    for m in metrics:
        _check_metric(m, "--metric")
    # a concurrency (4) or a rate (2.5): the sweep's axis is known once it is read;
    # a whole number stays an int, as a concurrency level is held
    levels_at = (
        [int(x) if x.is_integer() else x for x in parse_list(at, "--at", float)] if at else []
    )
    if kind == "lead" and not levels_at:
        raise UsageError("--question lead needs --at LEVELS (e.g. --at 1,64)")
    if levels_at and kind != "lead":
        # the crossover question read --at as its levels: two far apart gave an unrefined
        # crossover across the whole range
        raise UsageError(f"--at is for --question lead (who leads at those levels), not {kind}")
    the_slo = parse_slo(slo) if slo else None
    if kind == "capacity" and the_slo is None:
        raise UsageError("--question capacity needs --slo METRIC<=LIMIT")
    if the_slo is not None and kind != "capacity":
        raise UsageError(
            f"--slo is for --question capacity (most concurrency under it), not {kind}"
        )
    if budget is not None and not 0.0 < budget <= 1.0:
        raise UsageError(f"--budget {budget:g}: give a share of the grid's time, 0 < B <= 1")
    check_tie_margin(tie_margin)
    if start_s is not None and not 0 <= start_s < math.inf:
        raise UsageError(f"--start-s {start_s:g}: give 0 or more seconds")
    if engine_logs is not None and replay is None:
        raise UsageError("--engine-logs goes with --replay (a live decision times its starts)")
    if engine_logs is not None and not engine_logs.is_dir():
        raise UsageError(f"--engine-logs {engine_logs}: no such folder")
    if remote and not check:
        raise UsageError("--remote goes with --check")
    if check and config is None:
        raise UsageError("--check goes with --config sweep.yaml")
    if (config is None) == (replay is None):
        raise UsageError("give --config sweep.yaml (live) or --replay sweep.db, one of them")
    mine = [replay, prior] + ([out / "sweep.db", out / "sweep.json"] if out else [])
    if replay is not None and replay.is_dir():  # a results folder: its database is kept
        mine += [replay / "sweep.db", replay / "sweep.db.xz"]
    check_output_file(json_out, "--json", keep=[config, *mine])
    from crossover.decide.replay import load_prior

    the_prior = load_prior(prior) if prior else None
    if prior is not None and config is not None:  # what the forecast does not say: said
        from crossover.decide.replay import prior_notes
        from crossover.sweep.config import load_sweep_config

        said = load_sweep_config(config, {})
        names = [t.name for t in said.targets]
        notes = prior_notes(prior, names, said.input_tokens, said.output_tokens)
        for note in notes if said.rates is None else []:  # along rates: refused, below
            typer.echo(f"note: {note}", err=True)
    from crossover.decide.state import PolicyConfig

    policy = PolicyConfig(
        reference_repeats=reference_repeats,
        confirm_single_runs=confirm_single_runs,
        refine_inconclusive=refine_inconclusive,
        tie_rel=tie_margin,
        budget_factor=0.0 if live_levels else PolicyConfig.budget_factor,
        sequential=live_levels,
        budget=budget,
        start_s=start_s or 0.0,
    )
    if replay is not None:
        if out is not None:
            raise UsageError("--out goes with --config; a replay writes nothing but --json")
        _replay(
            replay, kind, metrics, target, levels_at, the_slo, the_prior, json_out, policy,
            start_s, engine_logs,
        )  # fmt: skip
        return
    assert config is not None
    if target:
        raise UsageError("--target picks a replay's targets; a live decision takes the YAML's")
    if live_levels:
        raise UsageError("--live-levels goes with --replay (a live decision's levels are live)")
    if check:
        _check(
            config, kind, metrics, levels_at, the_slo, the_prior, policy, remote,
            prior, start_s, json_out, out,
        )  # fmt: skip
        return
    if out is None:
        raise UsageError("--out DIR is required with --config (or --check to check it only)")
    sweep = _live(config, out, kind, metrics, levels_at, the_slo, the_prior, json_out, policy)
    if not allow_invalid:
        _fail_on_invalid(sweep)


def _fail_on_invalid(sweep: SweepFile) -> None:
    """Exit 3, as a sweep does, when a run the decision measured or kept is not valid: a
    target whose every run failed left the question unanswered, and the command said 0."""
    from crossover.errors import InvalidRunError

    runs = sweep.runs
    invalid = [r for r in runs if r.summary.verdict != "valid"]
    if invalid:
        raise InvalidRunError(
            f"{len(invalid)} of {len(runs)} runs are not valid (shown, never used as points); "
            "--allow-invalid to exit 0"
        )


def _write_json(
    path: Path | None, data: dict[str, Any], what: str = "decision", flag: str = "--json"
) -> None:
    if path is None:
        return
    import orjson

    from crossover.cli.common import write_output

    write_output(path, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n", flag)
    typer.echo(f"{what}: {path}")


def _keep_other_question(path: Path, data: dict[str, Any]) -> None:
    """An earlier decision of another question in the folder (another kind, metrics,
    levels or SLO over the same runs) is kept beside it, renamed with its question's
    stamp, not overwritten: each answer stands on the same records."""
    import orjson

    try:
        held = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return
    if not isinstance(held, dict) or held.get("question") == data.get("question"):
        return
    n = 1
    while (kept := path.with_name(f"{path.stem}.{n}{path.suffix}")).exists():
        n += 1
    path.rename(kept)
    typer.echo(f"an earlier decision of another question kept as {kept}")


def _replay(
    db: Path,
    kind: QuestionKind,
    metrics: list[str],
    targets: list[str] | None,
    at: list[float],
    slo: SloTerm | None,
    prior: Any,
    json_out: Path | None,
    policy: PolicyConfig,
    start_s: float | None,
    engine_logs: Path | None,
) -> None:
    from crossover.analysis.gc import gc_runs
    from crossover.decide.replay import replay
    from crossover.decide.timing import recorded, replay_json, replay_lines
    from crossover.records.readable import readable_database

    with readable_database(db) as readable:  # a committed sweep.db.xz: a copy, removed after
        folder, own = _own_sweep(db)
        gc = gc_runs(folder, own, database=readable) if own else []
        if engine_logs is None and own and (folder / "engines").is_dir():
            engine_logs = folder / "engines"  # the starts the database did not time
        r = replay(
            readable, kind=kind, metrics=metrics, targets=targets, at=at, slo=slo,
            cfg=policy, prior=prior, start_s=start_s, engine_logs=engine_logs, gc=gc,
        )  # fmt: skip
    seen = recorded(own, r) if own else None
    for line in replay_lines(r, db, start_s, seen):
        typer.echo(line)
    _write_json(json_out, replay_json(r, db, start_s, seen))


def _own_sweep(db: Path) -> tuple[Path, SweepFile | None]:
    """``db``'s folder, and the sweep whose folder holds ``db`` as its own database
    (``sweep.db`` or ``sweep.db.xz`` beside its sweep.json, or the folder): a replay names
    the KV-full and GC-pause runs among those it read; ``None`` for a database alone, whose
    folder holds no sweep of its own."""
    from crossover.records.readable import PACKED, PLAIN
    from crossover.report.load import load_sweep

    folder = db if db.is_dir() else db.parent
    own = db.is_dir() or db.name in (PLAIN, PACKED)
    if not own or not (folder / "sweep.json").is_file():
        return folder, None
    try:
        return folder, load_sweep(folder)
    except UsageError:  # a sweep.json the replay does not need: its lines are left out
        return folder, None


def refuse_prior_on_rates(q: Any, prior: Any) -> None:
    """``--prior`` on a question along rates: one line, exit 2 (the forecast is keyed by
    concurrency, docs/decide.md "Along rates")."""
    from crossover.decide.model import PRIOR_ON_RATES

    if q.axis == "rate" and prior is not None:
        raise UsageError(PRIOR_ON_RATES)


def _check(
    config: Path,
    kind: QuestionKind,
    metrics: list[str],
    at: list[float],
    slo: SloTerm | None,
    prior: Any,
    policy: PolicyConfig,
    remote: bool,
    prior_path: Path | None,
    start_s: float | None,
    json_out: Path | None,
    out: Path | None = None,
) -> None:
    """``--check``: the YAML checked as ``sweep --check`` does, the decision's plan, and
    its GPU time estimated from the prior (``crossover.decide.plan``); with ``--json``,
    the plan as JSON too; with ``--out DIR``, what DIR's database already holds of it and
    what comes next (``crossover.decide.resume``, read only: nothing measured)."""
    from crossover.cli.sweep import report_check
    from crossover.decide.live import question_for
    from crossover.decide.plan import decision_plan, plan_json, plan_lines
    from crossover.sweep.check import check_config
    from crossover.sweep.config import load_sweep_config

    cfg = load_sweep_config(config, {})
    q = question_for(cfg, kind, metrics, at, slo)
    refuse_prior_on_rates(q, prior_path)
    report_check(check_config(cfg, local=not remote, only=None), str(config))
    plan = decision_plan(cfg, q, prior, policy, prior_path, start_s)
    for line in plan_lines(plan):
        typer.echo(line)
    data = plan_json(plan, str(config))
    if out is not None:
        from crossover.decide.resume import resume_json, resume_lines, resume_of
        from crossover.records.database_file import check_database_file

        check_database_file(out / "sweep.db")  # not a database: one line, nothing read
        resume = resume_of(cfg, q, out, policy, prior)
        for line in resume_lines(resume, q):
            typer.echo(line)
        data["resume"] = resume_json(resume)
        if resume.refused or resume.changed:  # the live command would refuse the folder
            _write_json(json_out, data, "plan")
            raise UsageError(f"{out}: the live decision refuses this folder (said above)")
    _write_json(json_out, data, "plan")


def _live(
    config: Path,
    out: Path,
    kind: QuestionKind,
    metrics: list[str],
    at: list[float],
    slo: SloTerm | None,
    prior: Any,
    json_out: Path | None,
    policy: PolicyConfig,
) -> SweepFile:
    from crossover.cli.common import console as make_console
    from crossover.cli.common import run_async
    from crossover.decide.live import decide_live, question_for
    from crossover.decide.timing import live_json, live_lines
    from crossover.records.database_file import check_database_file, check_writable
    from crossover.records.folder_lock import FolderLock
    from crossover.report.text import KeptRuns
    from crossover.sweep.check import check_config, raise_if_errors
    from crossover.sweep.config import load_sweep_config

    cfg = load_sweep_config(config, {})
    q = question_for(cfg, kind, metrics, at, slo)
    refuse_prior_on_rates(q, prior)
    FolderLock.refuse_if_busy(out)  # another writer: said before the slower checks
    check_database_file(out / "sweep.db")  # before any server is asked or engine started
    raise_if_errors(check_config(cfg, local=True, only=None), str(config))
    check_writable(out)
    console = make_console(stderr=True)
    kept = KeptRuns(console)
    try:
        reasons: Reasons = {}  # each level's why, for its start line
        events = live_events(console, kept, reasons)
        result = run_async(
            decide_live(cfg, out, q, policy, prior=prior, events=events, reasons=reasons)
        )
    finally:
        kept.flush()
    for line in live_lines(result, q, out):
        typer.echo(line)
    # the answer beside the records it stands on, for `crossover report DIR` to show
    from crossover.report.decision import DECISION_FILE

    data = live_json(result, q, out)
    _keep_other_question(out / DECISION_FILE, data)
    _write_json(out / DECISION_FILE, data, flag="--out")
    if json_out is not None and json_out.resolve() != (out / DECISION_FILE).resolve():
        _write_json(json_out, data)
    return result.sweep
