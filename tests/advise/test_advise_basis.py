"""What each advice row's figure rests on (issue 30 item 6), and SGLang on its own measured
profiles (issue 28 item 6): every row says whether its figure is a measurement, the
engine's own calibrated profile or a profile borrowed from another engine, and a borrowed
estimate never ranks above a measured one unless its row says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crossover.advise import AdviceRequest, advise, load_model, load_results, system_from_flags
from crossover.advise.efficiency import load_calibration
from crossover.advise.explain import TIE_FRACTION
from crossover.cli.app import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
SGLANG_A = ROOT / "docs/results/h200/sglang-a"


def _advice(
    gpu: str = "H200",
    gpus: int = 1,
    model: str = "llama-3.1-8b",
    conc: tuple[int, ...] = (1, 64, 512),
    **kw: Any,
) -> dict[str, Any]:
    if kw.get("quant") is None:
        kw["quant"] = "bf16"  # one format: these tests are about engines, not formats
    req = AdviceRequest(
        system=system_from_flags(gpu, gpus, "nvlink" if gpus > 1 else None),
        model=load_model(model),
        input_tokens=200,
        output_tokens=256,
        concurrency=list(conc),
        **kw,
    )
    return advise(req)


def _rows(advice: dict[str, Any], regime: str) -> dict[str, dict[str, Any]]:
    """The best-ranked row of each engine in a regime."""
    out: dict[str, dict[str, Any]] = {}
    for r in advice["recommendations"]:
        if r["regime"] == regime and r["engine"] not in out:
            out[r["engine"]] = r
    return out


def test_every_row_says_what_its_figure_rests_on() -> None:
    advice = _advice()
    for r in advice["recommendations"]:
        assert r["basis"]["kind"] in ("measured", "calibrated", "borrowed", "roofline")
        assert r["basis"]["label"]
    for regime in ("low", "mid", "high"):
        rows = _rows(advice, regime)
        # SGLang: its own profile, fitted to the sglang-a sweep, and the row says so
        sglang = rows["sglang"]
        assert sglang["basis"]["kind"] == "calibrated"
        assert sglang["predicted"]["profile"] == "sglang"
        assert sglang["basis"]["label"] == "measured: sglang-a, H200"
        assert any("measured: sglang-a, H200" in reason for reason in sglang["reasons"])
        assert rows["vllm"]["basis"]["label"] == "measured: vllm-a, sglang-a, H200"
        # TensorRT-LLM: never measured, vLLM's profile, and the row says so
        trt = rows["trtllm"]
        assert trt["basis"]["kind"] == "borrowed" and trt["basis"]["profile"] == "vllm"
        assert trt["basis"]["label"] == "borrowed: vllm profile, trtllm never measured"
        assert any("never measured" in reason for reason in trt["reasons"])
        assert "measured-before-borrowed" in {x["id"] for x in trt["rules"]}
        assert "measured-before-borrowed" not in {x["id"] for x in sglang["rules"]}


def test_sglang_figures_are_its_own_not_vllms() -> None:
    """Before SGLang was measured its rows repeated vLLM's figures to the token."""
    rows = _rows(_advice(), "high")
    sglang, vllm = rows["sglang"]["predicted"], rows["vllm"]["predicted"]
    assert sglang["output_tok_s"] != pytest.approx(vllm["output_tok_s"], rel=0.02)
    # sglang-a, c=512: SGLang 8,218 output tok/s beside vLLM's 9,742 in the same session
    assert sglang["output_tok_s"] < vllm["output_tok_s"]


@pytest.mark.parametrize(
    ("gpu", "gpus", "model", "quant"),
    [
        ("H200", 1, "llama-3.1-8b", None),
        ("H100", 4, "llama-3.1-8b", "fp8"),
        ("H200", 1, "qwen3-30b-a3b", "fp8"),
        ("H100", 2, "llama-3.1-70b", "fp8"),
    ],
)
def test_a_borrowed_estimate_never_outranks_a_measured_one_silently(
    gpu: str, gpus: int, model: str, quant: str | None
) -> None:
    advice = _advice(gpu, gpus, model, conc=(1, 8, 64), quant=quant)
    recs = advice["recommendations"]
    assert any(r["basis"]["kind"] == "borrowed" for r in recs)
    for lent in (r for r in recs if r["basis"]["kind"] == "borrowed"):
        below = [
            r
            for r in recs
            if r["regime"] == lent["regime"]
            and r["basis"]["kind"] in ("measured", "calibrated")
            and r["rank"] > lent["rank"]
        ]
        if not below:
            continue
        # it ranks above a measured candidate: only by leading it beyond the tie band,
        # and its row says by how much, if the borrowed profile holds
        place = lent["borrowed_rank"]
        assert place is not None and place["above"] == below[0]["engine"]
        assert place["lead_pct"] > TIE_FRACTION * 100
        assert lent["ranked_by"]["value"] > below[0]["ranked_by"]["value"] / (1 - TIE_FRACTION)
        assert f"it would lead it by {place['lead_pct']:.0f}%" in lent["reasons"][0]
        assert lent["reasons"][0].startswith(lent["basis"]["label"])


def test_identical_borrowed_figures_lose_the_tie_and_say_where_they_would_rank() -> None:
    """The issue's case: TensorRT-LLM on vLLM's profile has vLLM's figures to the token,
    and rule 1 put it first at low and mid concurrency."""
    advice = _advice()
    for regime in ("low", "mid"):
        rows = _rows(advice, regime)
        trt, vllm = rows["trtllm"], rows["vllm"]
        assert trt["predicted"]["output_tok_s"] == pytest.approx(vllm["predicted"]["output_tok_s"])
        assert vllm["rank"] == 1 and trt["rank"] > rows["sglang"]["rank"]
        place = trt["borrowed_rank"]
        assert place["rank_if_it_holds"] == 1 and place["after"] == "vllm"
        assert place["after_pct"] == pytest.approx(0.0, abs=0.01)
        assert "it would rank #1 if the vllm profile holds for trtllm" in trt["reasons"][0]
        assert any("trtllm never measured" in n and regime in n for n in advice["notes"])


def test_a_borrowed_estimate_ranks_by_the_low_end_of_its_range() -> None:
    # c=512: vLLM's profile (lent to TensorRT-LLM) is 32% above SGLang's measured one,
    # but the low end of its range (30% below) is not: it ranks below SGLang and says
    # where it would rank if the borrowed profile held
    rows = _rows(_advice(), "high")
    trt, sglang = rows["trtllm"], rows["sglang"]
    assert rows["vllm"]["rank"] < sglang["rank"] < trt["rank"]
    place = trt["borrowed_rank"]
    assert place["after"] == "sglang" and place["after_pct"] > 10
    assert place["rank_if_it_holds"] <= sglang["rank"] < trt["rank"]
    assert "ranks by the low end of its range" in trt["reasons"][0]
    low, high = trt["range"]["low"], trt["range"]["high"]
    point = trt["predicted"]["output_tok_s"]
    assert low == pytest.approx(0.7 * point) and high == pytest.approx(1.12 * point)
    assert trt["ranked_by"]["value"] == pytest.approx(low)


def test_roofline_advice_keeps_its_order_and_marks_rows() -> None:
    advice = _advice(predictions="roofline")
    assert {r["basis"]["kind"] for r in advice["recommendations"]} == {"roofline"}
    assert all(r["borrowed_rank"] is None for r in advice["recommendations"])


def test_the_terminal_row_says_measured_or_borrowed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["advise", "--gpu", "H200", "--model", "llama-3.1-8b", "--concurrency", "1,64,512"]
    args += ["--quant", "bf16", "--input-tokens", "200", "--output-tokens", "256"]
    assert cli_main([*args, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "(estimate: sglang profile, measured: sglang-a, H200)" in out
    assert "(estimate: vllm profile, measured: vllm-a, sglang-a, H200)" in out
    assert "(estimate: borrowed: vllm profile, trtllm never measured; would rank #1" in out
    assert "(estimate: vllm profile)" not in out
    # the default table marks the borrowed figures and says how they are ranked
    assert cli_main(args) == 0
    table = capsys.readouterr().out
    trt = next(line for line in table.splitlines() if line.startswith("  trtllm bf16"))
    assert "~" in trt
    assert "borrowed estimate (vllm profile, trtllm never measured): ranked by the low end" in table


def test_sglang_graphs_off_is_compared_with_its_own_graphs_off_fit(tmp_path: Path) -> None:
    """As for vLLM eager and llama.cpp without graphs: a measured graphs-off target is
    compared with the graphs-off profile of its engine, now SGLang's own."""
    out = tmp_path / "advice.json"
    args = ["advise", "--model", "llama-3.1-8b", "--gpu", "H200", "--concurrency", "1,64,256"]
    args += ["--input-tokens", "200", "--output-tokens", "256", "--results", str(SGLANG_A)]
    assert cli_main([*args, "--json", str(out)]) == 0
    advice = json.loads(out.read_text())
    nographs = [c for c in advice["comparisons"] if c["target"] == "sglang-nographs"]
    assert nographs and all(c["predicted"]["profile"] == "sglang-nographs" for c in nographs)
    graphs = [c for c in advice["comparisons"] if c["target"] == "sglang"]
    assert graphs and all(c["predicted"]["profile"] == "sglang" for c in graphs)
    rows = [r for r in advice["calibration"]["rows"] if r["engine"] == "sglang"]
    assert {r["profile"] for r in rows} == {"sglang", "sglang-nographs"}
    per = advice["calibration"]["per_engine"]
    assert per["sglang"] <= 15 and per["sglang-nographs"] <= 15
    assert advice["calibration"]["constants"]["in_sample"] is True
    # the measured rows say so, with the sweep they come from
    measured = [r for r in advice["recommendations"] if r["figures_from"] == "measured"]
    assert measured and all(r["basis"]["kind"] == "measured" for r in measured)
    sglang = next(r for r in measured if r["engine"] == "sglang")
    assert sglang["basis"]["label"].startswith("measured: sglang")
    assert sglang["basis"]["label"].endswith(" in sglang-a")


def test_graphs_off_profiles_differ_from_graphs_on() -> None:
    cal = load_calibration()
    on, off = cal.profile("sglang"), cal.profile("sglang", cuda_graphs=False)
    assert on is not None and off is not None and on is not off
    # SGLang without CUDA graphs: ~20 ms per token at one user (48 tok/s), with ~5 ms
    assert off.step_us_per_layer > 10 * on.step_us_per_layer
    assert cal.basis("sglang", cuda_graphs=False).label == "measured: sglang-a, H200"
    assert cal.basis("trtllm", cuda_graphs=False).kind == "borrowed"
    assert cal.basis("nosuchengine").kind == "roofline"


def test_sglang_a_runs_load_as_sglang_targets() -> None:
    res = load_results(SGLANG_A)
    by = {(m.target, m.concurrency): m for m in res.measured}
    assert by[("sglang", 1)].engine == "sglang" and by[("sglang", 1)].cuda_graphs is True
    assert by[("sglang-nographs", 1)].cuda_graphs is False
    # the streaming variant reads as graphs on: without --exclude it would join the fit
    assert by[("sglang-incremental", 64)].cuda_graphs is True


def test_an_engine_without_any_profile_ranks_below_every_measured_one() -> None:
    """A calibration file without llama.cpp: its roofline (an upper bound, 30-40% above
    the measured engines' estimates here) must not lead them."""
    cal = load_calibration()
    mine = {k: v for k, v in cal.profiles.items() if not k.startswith("llamacpp")}
    req = AdviceRequest(
        system=system_from_flags("H200"),
        model=load_model("llama-3.1-8b"),
        input_tokens=200,
        output_tokens=256,
        concurrency=[1, 64],
    )
    advice = advise(req, calibration=cal.model_copy(update={"profiles": mine}))
    for regime in ("low", "high"):
        recs = [r for r in advice["recommendations"] if r["regime"] == regime]
        llamacpp = next(r for r in recs if r["engine"] == "llamacpp")
        assert llamacpp["basis"]["kind"] == "roofline"
        assert llamacpp["rank"] > max(
            r["rank"] for r in recs if r["basis"]["kind"] in ("measured", "calibrated")
        )
        assert llamacpp["borrowed_rank"]["rank_if_it_holds"] == 1
        assert "an upper bound, ranked below every measured candidate" in llamacpp["reasons"][0]
