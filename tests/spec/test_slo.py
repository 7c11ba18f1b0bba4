"""One SLO type (``crossover.spec.slo``): one syntax read at the edge, and each place that
writes an SLO writes the shape it always wrote (a sweep its text, a run's goodput limits a
mapping, the capacity file a list of terms), so committed files load and read back alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from crossover.capacity.runner import CapacityConfig
from crossover.capacity.schema import CapacityFile
from crossover.errors import UsageError
from crossover.metrics.context import RunContext
from crossover.spec.run import RunConfig
from crossover.spec.slo import Slo, SloTerm, parse_slo
from crossover.sweep.config import SweepConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results"
URL = "http://127.0.0.1:9"


def test_slo_terms_parse_and_give_the_per_request_limits() -> None:
    terms = parse_slo("ttft_ms.p99=500, tpot_ms.p50=50,ttft_ms.p50=200,queue_ms.max=10")
    assert [str(t) for t in terms] == [
        "ttft_ms.p99<=500", "tpot_ms.p50<=50", "ttft_ms.p50<=200", "queue_ms.max<=10",
    ]  # fmt: skip
    assert terms.per_request().limits() == {"ttft_ms": 200.0, "tpot_ms": 50.0}
    assert terms.per_request().is_per_request and not terms.is_per_request


def test_one_slo_syntax_for_run_sweep_capacity_and_decide() -> None:
    """``METRIC=LIMIT`` (run's old form) is ``METRIC.max=LIMIT``: every request within it;
    its per-request limit is what run's goodput always used. ``<=`` reads as ``=``
    (decide's form), so a term's own text reads back to it."""
    (term,) = parse_slo("ttft_ms=500")
    assert str(term) == "ttft_ms.max<=500"
    assert parse_slo("ttft_ms=500,tpot_ms=50").per_request().limits() == {
        "ttft_ms": 500.0,
        "tpot_ms": 50.0,
    }
    slo = parse_slo("ttft_ms.p99<=500,e2e_ms.p50=0.001")
    assert parse_slo(str(slo)) == slo == parse_slo(slo.text())
    assert slo.text() == "ttft_ms.p99=500,e2e_ms.p50=0.001"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttft_ms", "expected METRIC.STAT=LIMIT"),
        ("ttfb_ms.p99=500", "unknown metric 'ttfb_ms'"),
        ("ttft_ms.p42=500", "unknown statistic 'p42'"),
        ("ttft_ms.p99=fast", "not a number"),
        ("ttft_ms.p99=-1", "positive"),
        ("ttft_ms.p99=1,ttft_ms.p99=2", "given twice"),
        ("ttft_ms=1,ttft_ms.max=2", "given twice"),
        ("", "at least one term"),
        ("ttft_ms.p50<=200,,tpot_ms<=50", "empty item in 'ttft_ms.p50<=200,,tpot_ms<=50'"),
        ("ttft_ms.p50<=200,", "empty item in 'ttft_ms.p50<=200,'"),
        (",ttft_ms.p50<=200", "empty item"),
        ("ttft_ms.p50<=200, ,tpot_ms<=50", "empty item"),
    ],
)
def test_bad_slo_is_one_line(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=f"^--slo: .*{message}"):
        parse_slo(text)


def test_a_mapping_reads_as_the_text_does() -> None:
    assert Slo.model_validate({"ttft_ms.p99": 500, "tpot_ms": 20}) == parse_slo(
        "ttft_ms.p99=500,tpot_ms.max=20"
    )
    assert Slo.model_validate({}) == Slo() and not Slo()
    with pytest.raises(ValidationError, match="unknown metric 'speed'"):
        Slo.model_validate({"speed": 3})
    term = {"metric": "ttft_ms", "stat": "p99", "limit": 5}
    with pytest.raises(ValidationError, match=r"ttft_ms\.p99 given twice"):
        Slo.model_validate([term, term])


def test_a_term_holds_only_a_measured_value_within_its_limit() -> None:
    term = SloTerm(metric="ttft_ms", stat="p99", limit=500)
    assert term.holds(500.0) and term.holds(0.0)
    assert not term.holds(500.5) and not term.holds(None)


def test_a_sweep_writes_its_slo_as_text() -> None:
    for given in ("ttft_ms.p99=500, tpot_ms.p50=50", {"ttft_ms.p99": 500, "tpot_ms.p50": 50}):
        cfg = SweepConfig.model_validate(
            {
                "targets": [{"name": "a", "url": URL}],
                "concurrency": [1],
                "output_tokens": 4,
                "slo": given,
            }
        )
        assert cfg.model_dump(mode="json")["slo"] == "ttft_ms.p99=500,tpot_ms.p50=50"
        assert SweepConfig.model_validate_json(cfg.model_dump_json()) == cfg
        assert cfg.per_request_slo().limits() == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    with pytest.raises(ValidationError, match="at least one term"):
        SweepConfig.model_validate(
            {
                "targets": [{"name": "a", "url": URL}],
                "concurrency": [1],
                "output_tokens": 4,
                "slo": {},
            }
        )


def test_a_run_writes_its_goodput_limits_as_a_mapping() -> None:
    run = RunConfig(
        url=URL, model="m", concurrency=1, output_tokens=4, slo=parse_slo("ttft_ms=200")
    )  # type: ignore[call-arg]
    assert run.model_dump(mode="json")["slo"] == {"ttft_ms": 200.0}
    assert RunConfig.model_validate_json(run.model_dump_json()) == run
    assert RunConfig(url=URL, model="m", concurrency=1, output_tokens=4).model_dump()["slo"] == {}  # type: ignore[call-arg]
    # what a stored run holds reads back to the same limits
    ctx = RunContext.model_validate(
        {"mode": "concurrency", "output_tokens": 4, "endpoint": "completions",
         "engine": {"name": "openai", "url": URL, "model": "m"}, "started_at": "now",
         "slo": {"ttft_ms": 200.0, "e2e_ms": 0.001}}
    )  # fmt: skip
    assert [str(t) for t in ctx.slo] == ["ttft_ms.max<=200", "e2e_ms.max<=0.001"]
    assert ctx.model_dump(mode="json")["slo"] == {"ttft_ms": 200.0, "e2e_ms": 0.001}


def test_a_run_holds_only_per_request_limits() -> None:
    with pytest.raises(ValidationError, match=r"unknown SLO 'ttft_ms\.p99'"):
        RunConfig(url=URL, model="m", concurrency=1, output_tokens=4, slo={"ttft_ms.p99": 5})  # type: ignore[call-arg, arg-type]
    with pytest.raises(ValidationError, match=r"unknown SLO 'queue_ms\.max'"):
        RunConfig(url=URL, model="m", concurrency=1, output_tokens=4, slo={"queue_ms": 5})  # type: ignore[call-arg, arg-type]


def test_capacity_takes_its_terms_and_gives_its_levels_the_per_request_limits() -> None:
    cfg = CapacityConfig(
        url=URL, model="m", output_tokens=4, slo=parse_slo("ttft_ms.p99=500,ttft_ms.p50=200")
    )  # type: ignore[call-arg]
    assert cfg.run_config(2.0, 0).slo.limits() == {"ttft_ms": 200.0}
    with pytest.raises(ValidationError, match="at least one term"):
        CapacityConfig(url=URL, model="m", output_tokens=4, slo=Slo())  # type: ignore[call-arg]


def test_the_committed_capacity_file_reads_and_writes_its_terms_alike() -> None:
    path = DOCS / "llamacpp-cpu" / "capacity.json"
    raw = json.loads(path.read_text("utf-8"))
    doc = CapacityFile.model_validate(raw)
    assert str(doc.slo) == "ttft_ms.p99<=500, tpot_ms.p50<=20"
    assert json.loads(doc.to_json())["slo"] == raw["slo"]
