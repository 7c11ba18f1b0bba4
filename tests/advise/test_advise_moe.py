"""Mixture of experts: touched-experts read, memory of all experts, MoE rules, forecast."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from crossover.advise import (
    AdviceRequest,
    Layout,
    advise,
    cost,
    load_model,
    memory,
    moe,
    system_from_flags,
)
from crossover.advise import forecast as fc
from crossover.cli.app import main


@pytest.fixture(scope="module")
def qwen() -> Any:
    return load_model("qwen3-30b-a3b")


def test_qwen3_moe_counts(qwen: Any) -> None:
    # 128 experts x 3 x 2048 x 768 x 48 layers; 3.35 B active (the card says 3.3 B)
    assert qwen.expert_params == 128 * 3 * 2048 * 768 * 48
    assert qwen.params == pytest.approx(30.53e9, rel=1e-3)
    assert qwen.active_params == pytest.approx(3.353e9, rel=1e-3)


@pytest.mark.parametrize(("e", "k"), [(128, 8), (8, 2), (64, 6)])
def test_touched_experts_limits(e: int, k: int) -> None:
    assert cost.touched_experts(e, k, 1) == pytest.approx(k)
    assert cost.touched_experts(e, k, 100_000) == pytest.approx(e)
    assert k < cost.touched_experts(e, k, 4) < e


def test_touched_bytes_from_active_to_all(qwen: Any) -> None:
    total, experts = cost.weight_bytes(qwen, "bf16"), cost.expert_weight_bytes(qwen, "bf16")
    assert experts == qwen.expert_params * 2
    one = cost.touched_weight_bytes(qwen, "bf16", 1)
    assert one == pytest.approx(total - experts + experts * 8 / 128)
    assert one == pytest.approx(qwen.active_params * 2, rel=1e-6)  # B=1 reads the active
    assert cost.touched_weight_bytes(qwen, "bf16", 4096) == pytest.approx(total)
    # FP8: experts at 1 byte, embeddings and head kept at 2
    assert cost.expert_weight_bytes(qwen, "fp8") == qwen.expert_params


def test_dense_read_is_every_weight() -> None:
    m = load_model("llama-3.1-8b")
    assert cost.expert_weight_bytes(m, "bf16") == 0.0
    assert cost.touched_weight_bytes(m, "bf16", 1) == cost.weight_bytes(m, "bf16")


def test_moe_memory_fit_counts_every_expert(qwen: Any) -> None:
    h200 = system_from_flags("H200").gpu
    fit = memory.fit("vllm", qwen, h200, Layout(), "bf16", 64, 456)
    assert fit.weights_gib_per_gpu == pytest.approx(qwen.params * 2 / 1024**3, rel=1e-6)
    assert fit.fits
    # 61 GB of weights do not fit a 24 GB card even though 6.7 GB are active per token
    fit = memory.fit("vllm", qwen, system_from_flags("RTX-4090").gpu, Layout(), "bf16", 1, 456)
    assert not fit.weights_fit


def test_llamacpp_expert_offload_layers() -> None:
    mixtral = load_model("mixtral-8x7b")
    gpu = system_from_flags("RTX-4090").gpu
    fit = memory.fit("llamacpp", mixtral, gpu, Layout(), "gguf-q8_0", 1, 768)
    off = moe.cpu_offload(mixtral, "gguf-q8_0", fit)
    assert off is not None
    per_layer = cost.expert_weight_bytes(mixtral, "gguf-q8_0") / 32 / 1024**3
    short = fit.weights_gib_per_gpu + fit.kv_gib_per_gpu - fit.usable_gib_per_gpu
    assert (off.n_cpu_moe - 1) * per_layer < short <= off.n_cpu_moe * per_layer
    assert off.flag == f"--n-cpu-moe {off.n_cpu_moe}"
    assert moe.cpu_offload(load_model("llama-3.1-70b"), "gguf-q8_0", fit) is None  # dense


@pytest.mark.parametrize(
    ("gpu", "quant", "tp", "status", "file"),
    [
        ("H200", "bf16", 1, "present", "E=128,N=768,device_name=NVIDIA_H200.json"),
        ("H200", "bf16", 2, "present", "E=128,N=384,device_name=NVIDIA_H200.json"),
        ("H200", "fp8", 1, "absent", "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"),
        ("RTX-4090", "bf16", 1, "absent", "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090.json"),
        ("RTX-3090", "bf16", 1, "unknown", "E=128,N=768,device_name=<RTX-3090>.json"),
    ],
)
def test_tuned_fused_moe_config(
    qwen: Any, gpu: str, quant: str, tp: int, status: str, file: str
) -> None:
    got = moe.tuned_config("vllm", gpu, qwen, quant, tp)
    assert got is not None
    assert (got.status, got.file) == (status, file)


def test_tuned_config_not_applicable() -> None:
    assert moe.tuned_config("vllm", "H200", load_model("llama-3.1-8b"), "bf16") is None
    assert moe.tuned_config("llamacpp", "H200", load_model("qwen3-30b-a3b"), "bf16") is None
    # expert parallel: whole experts per GPU, full FFN width
    assert moe.config_key(load_model("qwen3-30b-a3b"), "bf16", 2, ep=True) == "E=64,N=768"


def _advice(model: str, gpu: str, gpus: int = 1, **kw: Any) -> dict[str, Any]:
    req = AdviceRequest(
        system=system_from_flags(gpu, gpus),
        model=load_model(model),
        input_tokens=200,
        output_tokens=256,
        concurrency=[1, 64],
        **kw,
    )
    return advise(req)


def test_advise_qwen3_moe_on_h200() -> None:
    a = _advice("qwen3-30b-a3b", "H200", quant="bf16")
    assert a["model"]["experts"] == 128 and a["model"]["experts_per_token"] == 8
    recs = a["recommendations"]
    assert {r["engine"] for r in recs} >= {"vllm", "sglang", "llamacpp"}
    assert all("moe-memory-all-experts" in {x["id"] for x in r["rules"]} for r in recs)
    vllm = next(r for r in recs if r["engine"] == "vllm")
    assert "moe-tuned-kernel-config" in {x["id"] for x in vllm["rules"]}
    assert "E=128,N=768,device_name=NVIDIA_H200.json" in json.dumps(vllm["reasons"])


def test_advise_fp8_moe_ranks_untuned_vllm_after_tuned_in_tie() -> None:
    a = _advice("qwen3-30b-a3b", "H200", quant="fp8")
    high = {r["engine"]: r for r in a["recommendations"] if r["regime"] == "high"}
    # both measured engines in the tie band at c=64, where rule 1 puts vLLM first; but
    # vLLM has no fp8 tile config for this shape on the H200, so SGLang goes first
    sglang, vllm = high["sglang"]["ranked_by"]["value"], high["vllm"]["ranked_by"]["value"]
    assert abs(sglang / vllm - 1) < 0.10
    assert high["sglang"]["rank"] < high["vllm"]["rank"]
    assert "fp8_w8a8" in json.dumps(high["vllm"])


def test_advise_mixtral_two_gpus_says_expert_parallel() -> None:
    a = _advice("mixtral-8x7b", "H100-SXM", 2)
    text = json.dumps(a["recommendations"])
    assert "--enable-expert-parallel" in text
    assert "--ep-size 2" in text


def test_advise_mixtral_too_big_offers_n_cpu_moe() -> None:
    a = _advice("mixtral-8x7b", "RTX-4090", quant="gguf-q8_0")
    rows = [r for r in a["rejected"] if r["engine"] == "llamacpp"]
    assert rows and rows[0]["moe_offload"]["rule"] == "llamacpp-moe-cpu-offload"
    assert "--n-cpu-moe" in rows[0]["reason"]


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "mixtral-8x7b"])
def test_advise_cli_moe_models(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["advise", "--model", model, "--gpu", "H200", "--concurrency", "1,64"])
    assert rc == 0
    out = capsys.readouterr().out
    assert model in out and "MoE" in out


def test_synth_shape_names_are_known_to_advise() -> None:
    """Issue 30: the names of `crossover models synth --arch` resolve in advise."""
    from crossover.models.shapes import KNOWN_SHAPES

    for name in KNOWN_SHAPES:
        if name.startswith("tiny-"):
            continue  # test shapes, not models
        assert load_model(name).params > 0


def test_forecast_rows_and_borrowed_profile(qwen: Any) -> None:
    targets = [
        fc.parse_target("vllm=vllm:bf16@1,64", [1]),
        fc.parse_target("trt=trtllm:bf16", [1, 64]),
        fc.parse_target("sglang=sglang:bf16", [1]),
        fc.parse_target("q8=llamacpp:gguf-q8_0+f16-embeddings", [1]),
    ]
    rows = fc.forecast(
        qwen, system_from_flags("H200"), targets, input_tokens=200, output_tokens=256
    )
    by = {(r.target, r.concurrency): r for r in rows}
    assert by[("vllm", 1)].experts_touched_per_layer == pytest.approx(8.0)
    assert by[("vllm", 64)].read_gb_per_step > by[("vllm", 1)].read_gb_per_step
    # TensorRT-LLM was never measured: vLLM's figures, said so; SGLang was (sglang-a)
    assert by[("trt", 1)].profile_note == "estimate: borrowed vllm profile"
    assert by[("trt", 1)].step_ms == pytest.approx(by[("vllm", 1)].step_ms)
    assert by[("sglang", 1)].profile == "sglang"
    assert "sglang-a/sweep.json:sglang" in by[("sglang", 1)].profile_note
    assert by[("sglang", 1)].step_ms != pytest.approx(by[("vllm", 1)].step_ms)
    assert by[("vllm", 1)].total_tok_s == pytest.approx(by[("vllm", 1)].output_tok_s * 456 / 256)
    # Q8_0 layers at 8.5 bits, embeddings and head F16
    facts, quant = fc.checkpoint(qwen, "gguf-q8_0+f16-embeddings")
    body = qwen.params - qwen.embedding_params
    assert quant == "gguf-q8_0"
    assert facts.weight_bytes == int(body * 8.5 / 8 + qwen.embedding_params * 2)


def test_forecast_cli_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    args = ["--model", "qwen3-30b-a3b", "--gpu", "H200", "--input-tokens", "200"]
    args += ["--output-tokens", "256", "--concurrency", "1,8", "--target", "vllm=vllm:bf16"]
    assert fc.main([*args, "--json", str(out), "--date", "2026-12-02"]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == fc.SCHEMA and doc["date"] == "2026-12-02"
    assert doc["command"].startswith("python -m crossover.advise.forecast --model qwen3-30b-a3b")
    assert [r["concurrency"] for r in doc["rows"]] == [1, 8]
    assert "| vllm | vllm | bf16 | 8 |" in capsys.readouterr().out
    assert fc.main([*args[:-2], "--target", "bad"]) == 2


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--concurrency", "1,,8"], "--concurrency: empty item in '1,,8'"),
        (["--concurrency", "0,8"], "--concurrency: each item must be above 0, got 0 in '0,8'"),
        (["--concurrency", "1,x"], "--concurrency: expected a comma-separated list of integers"),
        (
            ["--target", "vllm=vllm:bf16@1,,8"],
            "--target 'vllm=vllm:bf16@1,,8': empty item in '1,,8'",
        ),
        (["--target", "vllm=vllm:bf16@"], "--target 'vllm=vllm:bf16@': empty list"),
        (["--target", "vllm=vllm:bf16@2,-1"], "each item must be above 0, got -1 in '2,-1'"),
    ],
)
def test_forecast_cli_refuses_a_bad_list_in_one_line(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``1,,8`` is not read as ``1,8``: one line, exit 2, no traceback."""
    args = ["--model", "qwen3-30b-a3b", "--gpu", "H200", "--input-tokens", "200"]
    args += ["--output-tokens", "256", "--concurrency", "1,8", "--target", "vllm=vllm:bf16"]
    assert fc.main([*args, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err


def test_committed_prediction_records_its_command() -> None:
    root = Path(__file__).resolve().parents[2] / "docs/results/h200/moe"
    doc = json.loads((root / "prediction.json").read_text("utf-8"))
    assert doc["schema"] == fc.SCHEMA and doc["gpu"] == "H200"
    levels = {r["target"]: [] for r in doc["rows"]}
    for r in doc["rows"]:
        levels[r["target"]].append(r["concurrency"])
    assert levels["vllm"][-1] == 512 and levels["vllm-fp8"][-1] == 512
    assert levels["sglang"][-1] == levels["llamacpp-q8"][-1] == 256
    assert "sglang: estimate: borrowed vllm profile" in doc["profiles"]
    command = doc["command"].removesuffix(" --json docs/results/h200/moe/prediction.json")
    assert command in (root / "prediction.md").read_text("utf-8")


def test_roofline_entry_is_a_moe_roofline_fact(qwen: Any) -> None:
    from crossover.analysis import RooflineFacts
    from crossover.analysis.roofline import step_bound_ms

    target = fc.parse_target("vllm=vllm:bf16", [1])
    entry = fc.roofline_entry(target, qwen, 4300.0, 456, "H200")
    facts = RooflineFacts.model_validate(entry)
    assert (facts.experts, facts.experts_per_token) == (128, 8)
    # c=1: the active weights (6.71 GB) plus one sequence's KV, at 4.3 TB/s
    want = (qwen.active_params * 2 + 98304 * 456) / 4.3e12 * 1e3
    assert step_bound_ms(facts, 1) == pytest.approx(want, rel=1e-3)


def test_untuned_rule_has_a_source_and_covers_every_batch() -> None:
    from crossover.advise.rules import moe_untuned_classes

    classes = moe_untuned_classes()
    assert [c.id for c in classes][-1] == "most"  # the catch-all comes last
    assert not classes[-1].gpus and classes[-1].max_n is None
    for c in classes:
        assert "PR #" in c.source or "measured" in c.source
        spans = sorted(r.batch for r in c.ranges)
        assert spans[0][0] == 1
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))
        assert all(0 <= r.slower_pct[0] <= r.slower_pct[1] for r in c.ranges)
    # the H200 measurement (TPOT p50 with the tuned file hidden) sits inside "most"
    most = classes[-1]
    # (2026-12-03, issue 39; and docs/results/h200/moe-tuning/summary.json of 2026-12-04)
    sessions = [
        {1: 1.0, 4: 4.6, 16: -0.8, 64: 0.4, 256: -1.0},
        {1: 1.3, 4: 4.6, 16: -0.9, 64: -0.6, 256: 0.5},
    ]
    for measured in sessions:
        for c, pct in measured.items():
            s = moe.untuned_slowdown("H200", c, 768)
            assert s is not None and s.cls == "most" and s.source == most.source
            assert pct <= s.high_pct
    assert "1.046 at c=4" in most.source and "moe-tuning/summary.json" in most.source


@pytest.mark.parametrize(
    ("gpu", "batch", "n", "cls", "low", "high"),
    [
        ("H200", 4, 768, "most", 0, 5.4),
        ("RTX-4090", 256, 768, "most", 0, 5.4),
        ("H20", 1, 768, "h20", 31, 60),  # PR #44152: 1.31x at batch 1, 1.60x at 32
        ("H20", 32, 768, "h20", 31, 60),
        ("H20", 2048, 768, "h20", 0, 3),  # ~1.0x from 512 on
        ("H200", 32, 96, "narrow-shard", 8, 25),  # PR #35457: 20-24% at 16-64
        ("H200", 1, 96, "narrow-shard", 2, 12),
        ("H200", 9000, 768, "most", 0, 5.4),  # past the measured batches: the last range
    ],
)
def test_untuned_slowdown_per_class(
    gpu: str, batch: int, n: int, cls: str, low: float, high: float
) -> None:
    s = moe.untuned_slowdown(gpu, batch, n)
    assert s is not None
    assert (s.cls, s.low_pct, s.high_pct) == (cls, low, high)
    assert s.factor == pytest.approx(1 + (low + high) / 200)


def test_absent_config_says_what_it_costs(qwen: Any) -> None:
    got = moe.tuned_config("vllm", "RTX-4090", qwen, "bf16", batches=[1, 8, 64])
    assert got is not None and got.status == "absent"
    assert [s.batch for s in got.slowdown] == [1, 8, 64]
    assert "expect 0-5.4% slower decode at batch 1-64 (GPU class most" in got.reason
    present = moe.tuned_config("vllm", "H200", qwen, "bf16", batches=[1, 64])
    assert present is not None and present.slowdown == [] and present.at(1) is None
    h20 = moe.tuned_config("vllm", "H20", qwen, "bf16", batches=[1])
    assert h20 is not None and h20.status == "unknown"
    assert "if none ships, expect 31-60% (up to 1.6x) slower decode at batch 1" in h20.reason


def test_the_advisor_applies_the_untuned_slowdown(qwen: Any) -> None:
    from crossover.advise import efficiency
    from crossover.advise.candidates import Candidate
    from crossover.advise.explain import predict_candidate

    cal = efficiency.load_calibration()
    req = AdviceRequest(
        system=system_from_flags("H200"), model=qwen, input_tokens=200, output_tokens=256
    )
    curve = cost.NoComm()
    fp8 = Candidate(engine="vllm", tp=1, pp=1, quant="fp8")  # no tuned FP8 file on the H200
    bf16 = Candidate(engine="vllm", tp=1, pp=1, quant="bf16")  # the tuned file ships
    for c, factor in ((fp8, 1 + (0 + 5.4) / 200), (bf16, 1.0)):
        got = predict_candidate(req, c, curve, 8, None, cal)
        raw = efficiency.predict(
            qwen, req.system, Layout(), c.quant, curve, cal.profiles["vllm"],
            concurrency=8, input_tokens=200, output_tokens=256,
        )  # fmt: skip
        assert got.step_ms == pytest.approx(raw.step_ms * factor)
        assert got.decode_tok_s_per_user <= raw.decode_tok_s_per_user
    advice = advise(req.model_copy(update={"quant": "fp8", "engines": ["vllm"]}))
    text = json.dumps(advice["recommendations"])
    assert "expect 0-5.4% slower decode" in text and "slowed by the range's middle" in text
