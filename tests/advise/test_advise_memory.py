"""Per-engine memory fit (measured overheads, --reserve-gib), near-misses and their
margins, and the consumer cases: 24 GB cards, one to four, with and without P2P."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crossover.advise import AdviceRequest, Layout, advise, load_model, memory, system_from_flags
from crossover.advise.memory import engine_memory, parse_reserve
from crossover.advise.rules import ENGINES
from crossover.cli.app import main
from crossover.errors import UsageError


def _advise(
    gpu: str,
    n: int,
    model: str,
    quant: str | None = None,
    interconnect: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    req = AdviceRequest(
        system=system_from_flags(gpu, n, interconnect),
        model=load_model(model),
        quant=quant,
        concurrency=kw.pop("concurrency", [1, 8, 64]),
        **kw,
    )
    return advise(req)


def _tops(advice: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["regime"]: r for r in advice["recommendations"] if r["rank"] == 1}


def _miss(advice: dict[str, Any], engine: str) -> dict[str, Any]:
    return next(m for m in advice["near_misses"] if m["engine"] == engine)


# --- the overheads as data -----------------------------------------------------------


def test_every_engine_has_a_memory_rule_with_sources() -> None:
    for engine in ENGINES:
        rule = engine_memory(engine)
        assert 0 < rule.utilization <= 1 and rule.source
        for c in rule.components:
            assert c.source and (c.gib is not None or c.formula is not None)
    vllm = {(c.name, c.only): c for c in engine_memory("vllm").components}
    dense, moe = vllm["peak activation", "dense"], vllm["peak activation", "moe"]
    assert dense.gib == 1.10 and dense.measured and moe.gib == 1.66 and moe.measured
    assert vllm["CUDA graphs", None].outside_budget


def test_vllm_budget_matches_its_own_log_on_the_h200() -> None:
    """vLLM 0.26 on the H200: 'Available KV cache memory: 109.53 GiB' for the 8B shape."""
    m, gpu = load_model("llama-3.1-8b"), system_from_flags("H200").gpu
    fit = memory.fit("vllm", m, gpu, Layout(), "bf16", concurrency=1, context_tokens=512)
    kv_budget = fit.usable_gib_per_gpu - fit.weights_gib_per_gpu
    # gpus.yaml's 141 GiB against the 139.8 GiB CUDA reports: within 2%
    assert kv_budget == pytest.approx(109.53, rel=0.02)
    assert fit.reserve_gib == pytest.approx(1.32, abs=0.01)  # activation + non-torch
    # at TP=2 the activation halves (the 2x H200 log: 0.61 GiB)
    tp2 = memory.fit("vllm", m, gpu, Layout(tp=2), "bf16", 1, 512)
    assert tp2.reserve_gib == pytest.approx(0.55 + 0.22, abs=0.01)


def test_llamacpp_compute_buffer_estimate_matches_the_logged_tiny_shape() -> None:
    """'CUDA0 compute buffer size = 5.51 MiB' for hidden 256, ffn 512, Llama 3 vocab, 4 slots."""
    from crossover.advise.model import facts_from_config

    tiny = facts_from_config(
        {
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 128256,
        },
        name="tiny",
        source="test",
    )
    buf = next(
        c for c in memory.charges("llamacpp", tiny, Layout(), 4) if c.name == "compute buffer"
    )
    assert buf.gib * 1024 == pytest.approx(5.51, rel=0.15)
    assert not buf.measured


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1.5", {"*": 1.5}),
        ("llamacpp=0.8,vllm=2", {"llamacpp": 0.8, "vllm": 2.0}),
        ("llama.cpp=0", {"llamacpp": 0.0}),
        (None, {}),
    ],
)
def test_parse_reserve(text: str | None, want: dict[str, float]) -> None:
    assert parse_reserve(text) == want


@pytest.mark.parametrize("bad", ["x", "-1", "tgi=1", "vllm=", "vllm=abc"])
def test_bad_reserve_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError):
        parse_reserve(bad)
    args = ["advise", "--gpu", "H100", "--model", "llama-3.1-8b", "--reserve-gib", bad]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--reserve-gib" in err and "Traceback" not in err


# --- near-misses and their margins ---------------------------------------------------


def test_near_miss_margin_when_the_weights_fit_but_the_context_does_not() -> None:
    # 8B bf16 on one 4090 with 200k-token prompts: weights fit, one sequence's KV does not
    advice = _advise("RTX 4090", 1, "llama-3.1-8b", "bf16", input_tokens=200_000, concurrency=[1])
    miss = _miss(advice, "vllm")
    fit = memory.fit(
        "vllm",
        load_model("llama-3.1-8b"),
        system_from_flags("RTX 4090").gpu,
        Layout(),
        "bf16",
        1,
        200_256,
    )
    needs = fit.weights_gib_per_gpu + fit.kv_gib_per_gpu
    assert miss["needs_gib_per_gpu"] == pytest.approx(needs)
    assert miss["usable_gib_per_gpu"] == pytest.approx(fit.usable_gib_per_gpu)
    assert miss["short_gib"] == pytest.approx(needs - fit.usable_gib_per_gpu)
    assert f"{miss['short_gib']:.1f} GiB short" in miss["reason"]
    # (usable - weights) / 128 KiB per token: ~43k tokens, i.e. a 32k context
    assert "with a 32k context it fits" in miss["fits_with"]
    assert not miss["engine_recommended"]


def test_near_miss_margin_when_the_weights_do_not_fit() -> None:
    # 70B Q4_K_M on 2x 3090 with a desktop taking 4.5 GiB a card: 0.5 GiB short
    advice = _advise(
        "RTX 3090", 2, "llama-3.1-70b", "gguf-q4_k_m", "pcie-no-p2p", reserve_gib={"*": 4.5}
    )
    assert advice["recommendations"] == []
    miss = _miss(advice, "llamacpp")
    assert miss["config"]["pp"] == 2 and miss["config"]["split_mode"] == "layer"
    assert miss["usable_gib_per_gpu"] == pytest.approx(24 - 4.5)
    assert 0 < miss["short_gib"] < 1
    fixes = " | ".join(miss["fits_with"])
    assert "with gguf-q4_0 weights it fits" in fixes  # the next smaller GGUF type
    assert "with 3 GPUs (layer split) it fits" in fixes
    assert "--reserve-gib" in fixes
    # the other engines do not run GGUF: their near-miss names the rule, no margin
    vllm = _miss(advice, "vllm")
    assert vllm["rule"] == "format-engine" and vllm["short_gib"] is None


def test_advise_prints_near_misses_with_margins(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["advise", "--gpu", "RTX 3090", "--gpus", "2", "--model", "llama-3.1-70b"]
    args += ["--quant", "gguf-q4_k_m", "--reserve-gib", "llamacpp=4.5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "near misses" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("llamacpp tp=1 pp=2"))
    assert "usable:" in line and "GiB short" in line and "it fits" in line


# --- the consumer cases ----------------------------------------------------------------


def test_70b_q4_k_m_on_two_3090s_without_p2p_gets_llamacpp_layer_split(tmp_path: Path) -> None:
    """The issue's case: rejected by 0.4 GiB before the reserve was measured."""
    out = tmp_path / "advice.json"
    args = ["advise", "--gpu", "RTX 3090", "--gpus", "2", "--interconnect", "pcie-no-p2p"]
    args += ["--model", "llama-3.1-70b", "--quant", "gguf-q4_k_m", "--json", str(out)]
    assert main(args) == 0
    advice = json.loads(out.read_text())
    tops = _tops(advice)
    assert set(tops) == {"low", "mid", "high"}
    for rec in tops.values():
        assert rec["engine"] == "llamacpp"
        assert rec["config"]["split_mode"] == "layer" and rec["config"]["pp"] == 2
        assert rec["memory"]["headroom_gib"] > 1
        assert "llamacpp-split-modes" in {r["id"] for r in rec["rules"]}
    # one card alone is the near-miss, and it says two fit
    miss = _miss(advice, "llamacpp")
    assert miss["config"]["gpus"] == 1 and miss["engine_recommended"]
    assert "with 2 GPUs (layer split) it fits" in miss["fits_with"]


@pytest.mark.parametrize("gpu", ["RTX 3090", "RTX 4090"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("interconnect", ["pcie-no-p2p", "pcie"])
def test_24gb_cards(gpu: str, n: int, interconnect: str) -> None:
    q4 = _advise(gpu, n, "llama-3.1-70b", "gguf-q4_k_m", interconnect if n > 1 else None)
    if n == 1:  # 39.8 GiB of weights on a 24 GiB card: a near-miss that names the fix
        assert q4["recommendations"] == []
        assert "with 2 GPUs (layer split) it fits" in _miss(q4, "llamacpp")["fits_with"]
    else:  # llama.cpp's layer split, P2P or not
        assert all(r["engine"] == "llamacpp" for r in _tops(q4).values())
        assert all(r["config"]["pp"] >= 2 for r in _tops(q4).values())
    # 8B in bf16 fits one card with every engine (none rejects its one-GPU layout)
    small = _advise(gpu, n, "llama-3.1-8b", "bf16", interconnect if n > 1 else None)
    assert not [r for r in small["rejected"] if r["config"]["gpus"] == 1]
    if n >= 2:
        # TP only where it divides the heads (32): 3 GPUs never, and without P2P it
        # carries the consumer rule
        tps = {r["config"]["tp"] for r in small["recommendations"]}
        assert 3 not in tps
        for rec in small["recommendations"]:
            if rec["config"]["tp"] > 1 and interconnect == "pcie-no-p2p":
                assert "consumer-no-p2p" in {r["id"] for r in rec["rules"]}
    # 70B AWQ needs two cards at least for a tensor-parallel engine
    awq = _advise(gpu, n, "llama-3.1-70b", "int4-awq", interconnect if n > 1 else None)
    if n == 1:
        assert awq["recommendations"] == []
    else:
        assert any(r["engine"] in ("vllm", "trtllm", "sglang") for r in awq["recommendations"])


@pytest.mark.parametrize(
    ("tokens", "label"),
    [
        (8191, "a 4k context"),
        (8192, "an 8k context"),
        (43_000, "a 32k context"),
        (800, "an 800-token context"),
        (700, "a 700-token context"),
    ],
)
def testcontext_label(tokens: int, label: str) -> None:
    from crossover.advise.nearmiss import context_label

    assert context_label(tokens) == label


@pytest.mark.parametrize(
    ("mib", "graphs", "logged"),
    [(81_559, True, 0.83), (143_771, True, 0.903), (143_771, False, 0.91)],
)
def test_sglang_reserve_gives_the_fraction_sglang_chose(
    mib: int, graphs: bool, logged: float
) -> None:
    """SGLang 0.5.17's default --mem-fraction-static, as its logs on the project's GPUs
    say: H100 80GB (docs/results/h100/moe-warm-grid), H200 (docs/results/h200/moe,
    sglang-a), H200 with CUDA graphs off (sglang-a's sglang-nographs)."""
    gib = mib / 1024
    fraction = (gib - memory.sglang_reserve_gib(gib, Layout(), cuda_graphs=graphs)) / gib
    assert round(fraction, 3) == logged


@pytest.mark.parametrize(
    ("gpu", "kv_tokens"),
    [("H100-SXM", 89_595), ("H200", 750_191)],
)
def test_sglang_concurrency_cap_matches_its_kv_pool(gpu: str, kv_tokens: int) -> None:
    """The sequences of 456 tokens (200 in, 256 out) SGLang's KV pool held for the
    Qwen3-30B-A3B shape ('KV Cache is allocated. #tokens: 89595' on the H100, 750191 on
    the H200): the advice's cap within 10% (gpus.yaml's 80 and 141 GiB against the 79.2 and
    139.8 GiB CUDA reports). It said 343 on the H100 before SGLang had its own rule (vLLM's
    0.9 borrowed): the run at 256 queued and retracted requests the advice said would fit."""
    m, spec = load_model("qwen3-30b-a3b"), system_from_flags(gpu).gpu
    fit = memory.fit("sglang", m, spec, Layout(), "bf16", concurrency=256, context_tokens=456)
    assert fit.max_concurrency == pytest.approx(kv_tokens / 456, rel=0.10)


def test_sglang_near_miss_names_its_own_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama-3-70B FP8 (67.7 GiB) on one H100: SGLang's default fraction (0.83: a 13.6 GiB
    reserve) leaves no room, and the remedy is its own flag at the share that fits; at
    c=256 on the Qwen3-30B-A3B shape the queued row says what admits all of them (193:
    SGLang's H100 log held 8.20 GiB of KV, 196 sequences of 456 tokens)."""
    assert (
        main(["advise", "--gpu", "H100", "--model", "llama-3-70b", "--quant", "fp8", "--explain"])
        == 0
    )
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("sglang tp=1 pp=1 fp8"))
    assert "with --mem-fraction-static 0.87 it fits (the default is 0.83)" in line
    args = ["advise", "--gpu", "H100", "--model", "qwen3-30b-a3b", "--quant", "bf16"]
    args += ["--engines", "sglang", "--input-tokens", "200", "--concurrency", "64,256"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "193 of 256 fit" in out and "--mem-fraction-static 0.87 admits all 256" in out


def test_vllm_moe_budget_matches_its_own_logs() -> None:
    """vLLM 0.26 on the Qwen3-30B-A3B shape: '1.66 GiB for peak activation' (the fused-MoE
    workspace; the dense 8B's 1.1 scaled by hidden size said 0.55) and 'Available KV cache
    memory: 66.4 GiB' on the H200; 'GPU KV cache size: 129,328 tokens' on the H100, 283
    sequences of 456 (the advice said 343 with the dense figure, 317 with the MoE one, 302
    with the CUDA-graph estimate vLLM takes inside its budget, 284 with the budget a share
    of the 79.18 GiB CUDA reports rather than the datasheet's 80)."""
    m = load_model("qwen3-30b-a3b")
    h200 = memory.fit("vllm", m, system_from_flags("H200").gpu, Layout(), "bf16", 1, 456)
    assert h200.usable_gib_per_gpu - h200.weights_gib_per_gpu == pytest.approx(66.4, rel=0.003)
    h100 = memory.fit("vllm", m, system_from_flags("H100-SXM").gpu, Layout(), "bf16", 1, 456)
    assert h100.usable_gib_per_gpu - h100.weights_gib_per_gpu == pytest.approx(11.84, rel=0.01)
    assert h100.max_concurrency == pytest.approx(129_328 / 456, rel=0.01)
    # the estimate is an MoE's (vLLM's V1 runner); the dense shape's logs take none
    dense = memory.fit("vllm", load_model("llama-3-8b"), system_from_flags("H200").gpu,
                       Layout(), "bf16", 1, 512)  # fmt: skip
    assert dense.usable_gib_per_gpu - dense.weights_gib_per_gpu == pytest.approx(109.53, rel=0.003)


def test_sglang_candidates_carry_the_front_end_gc_caveat() -> None:
    """Every SGLang candidate names its front end's measured GC pauses (rule
    sglang-frontend-gc, docs/results/h100/sglang-gc) and the remedy to measure; vLLM's
    carry neither (the pauses are SGLang's, not the GPU's)."""
    advice = _advise("H100", 1, "qwen3-30b-a3b", quant="bf16", concurrency=[8, 64])
    recs = advice["recommendations"]
    sglang = [r for r in recs if r["engine"] == "sglang"]
    vllm = [r for r in recs if r["engine"] == "vllm"]
    assert sglang and vllm
    for r in sglang:
        assert "sglang-frontend-gc" in {x["id"] for x in r["rules"]}
        assert any("garbage collection" in x and "freeze_gc: true" in x for x in r["reasons"])
    for r in vllm:
        assert "sglang-frontend-gc" not in {x["id"] for x in r["rules"]}
        assert not any("garbage collection" in x for x in r["reasons"])


def test_a_budget_is_a_share_of_what_cuda_reports_where_measured() -> None:
    """vLLM's and SGLang's budgets are shares of cudaMemGetInfo's total (79.18 GiB on an
    H100 80GB, 139.8 on an H200, as vLLM logs them), not the datasheet's 80 and 141; a GPU
    nobody measured (here one described by --gpu-spec) keeps its datasheet figure."""

    h100, h200 = system_from_flags("H100").gpu, system_from_flags("H200").gpu
    assert (h100.memory_gib, h100.budget_gib) == (80, 79.18)
    assert (h200.memory_gib, h200.budget_gib) == (141, 139.8)
    m = load_model("qwen3-30b-a3b")
    fit = memory.fit("vllm", m, h100, Layout(), "bf16", 1, 456)
    assert fit.usable_gib_per_gpu == pytest.approx(0.9 * 79.18 - 1.66 - 0.22 - 0.64)
    # the advice JSON says the base its budgets are shares of
    advice = _advise("H100", 1, "qwen3-30b-a3b", quant="bf16", concurrency=[8])
    assert (advice["hardware"]["memory_gib"], advice["hardware"]["budget_gib"]) == (80, 79.18)
    described = system_from_flags(None, spec="memory=80GiB,bandwidth=3350GB/s,bf16=989,arch=sm90")
    assert described.gpu.cuda_gib is None and described.gpu.budget_gib == 80
    # a row whose memory --gpu-spec replaces drops its measured CUDA total with it
    bigger = system_from_flags("H100", spec="memory=94GiB")
    assert (bigger.gpu.memory_gib, bigger.gpu.budget_gib) == (94, 94)


def test_vllms_own_graph_estimate_is_not_lent_with_its_figures() -> None:
    """TensorRT-LLM borrows vLLM's overheads (never measured itself), not vLLM's way of
    accounting its budget: the CUDA-graph estimate vLLM takes inside its budget on an MoE
    is vLLM's alone (TensorRT-LLM is charged the graphs themselves once)."""
    m = load_model("qwen3-30b-a3b")
    names = {e: [c.name for c in memory.components(e, m)] for e in ("vllm", "trtllm")}
    assert "CUDA-graph estimate" in names["vllm"]
    assert "CUDA-graph estimate" not in names["trtllm"]
    assert names["trtllm"].count("CUDA graphs") == 1


def test_a_local_gpu_keeps_the_rows_cuda_total_only_for_its_own_size() -> None:
    """NVML's H100 80GB (79.65 GiB) keeps the row's measured 79.18; a card NVML names
    alike with other memory (a name matching one row) does not take a total that is not
    its own."""
    from crossover.advise.hardware import local_entry
    from crossover.advise.nvml import LocalGpu

    def card(gib: float) -> LocalGpu:
        return LocalGpu(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=int(gib * 2**30),
                        compute_capability="9.0")  # fmt: skip

    assert local_entry(card(79.65)).budget_gib == 79.18
    assert local_entry(card(94.0)).cuda_gib is None
    assert local_entry(card(64.0)).budget_gib == 64.0


def test_a_local_gpu_without_a_measured_total_takes_nvml_total_less_reserved() -> None:
    """Where the table has no CUDA total for the card (another memory size, or a product
    it lacks), NVML's total less what it says the driver reserves stands for it: on the
    H100 80GB the two agree (79.65 - 0.47 = 79.18 GiB, the host record of
    docs/results/h100/moe-open-decide-freeze against vLLM's logged total). A driver that
    does not say what it reserves leaves the datasheet's figure."""
    from crossover.advise.hardware import local_entry
    from crossover.advise.nvml import LocalGpu

    def card(name: str, gib: float, reserved: float | None) -> LocalGpu:
        return LocalGpu(
            index=0, name=name, memory_bytes=int(gib * 2**30), compute_capability="9.0",
            memory_reserved_bytes=None if reserved is None else int(reserved * 2**30),
        )  # fmt: skip

    # the table's own measured total stands where NVML's memory is the row's
    assert local_entry(card("NVIDIA H100 80GB HBM3", 79.65, 0.47)).budget_gib == 79.18
    # another size under the same name: NVML's own
    assert local_entry(card("NVIDIA H100 80GB HBM3", 94.0, 0.5)).budget_gib == 93.5
    assert local_entry(card("NVIDIA H100 80GB HBM3", 94.0, None)).cuda_gib is None
    # a product the table lacks
    mine = local_entry(card("NVIDIA Made Up 48GB", 47.5, 0.5))
    assert mine.form == "custom" and mine.budget_gib == 47.0
