"""``crossover plan --engine triton --hosted llamacpp|vllm``: the repository's config as
Triton's ModelConfig reads it, and the vLLM model run against a fake engine at its seam
(``make_engine``) with a fake ``triton_python_backend_utils``: streaming, the counts, the
counter, errors."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.plan import triton
from crossover.plan.triton_hosted import repository, vllm_parameters, write_repository
from tests.scripts import load_script

FINAL = 1


def test_repository_config_parses_as_triton_reads_it() -> None:
    files = repository("vllm", "vllm", vllm_parameters({"model": "/m", "max_num_seqs": 64}), 3)
    assert set(files) == {"vllm/config.pbtxt", "vllm/1/model.py",
                          "vllm/1/crossover_triton_common.py"}  # fmt: skip
    cfg = triton.parse_config(files["vllm/config.pbtxt"])
    assert cfg.backend == "python" and cfg.max_batch_size == 0
    assert cfg.model_transaction_policy.decoupled is True
    assert cfg.instance_group[0].count == 3
    inputs = {i.name: i for i in cfg.input}
    assert not inputs["text_input"].optional
    assert all(inputs[n].optional for n in ("max_tokens", "min_tokens", "ignore_eos", "stream"))
    args = json.loads(cfg.parameters["engine_args"].string_value)
    assert args == {"max_num_seqs": 64, "model": "/m"}
    with pytest.raises(UsageError):
        repository("sglang", "x", {}, 1)
    with pytest.raises(UsageError):
        repository("vllm", "x", {}, 0)


def test_plan_cli_refuses_misplaced_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "--engine", "vllm", "--model", "gemma-3-270m", "--hosted", "vllm",
                 "--out", str(tmp_path)]) != 0  # fmt: skip
    assert "--hosted and --instances are for --engine triton" in capsys.readouterr().err
    assert main(["plan", "--engine", "triton", "--model", "gemma-3-270m", "--hosted", "tgi",
                 "--out", str(tmp_path)]) != 0  # fmt: skip
    assert "--hosted must be one of" in capsys.readouterr().err
    assert main(["plan", "--engine", "triton", "--model", "gemma-3-270m", "--instances", "2",
                 "--out", str(tmp_path)]) != 0  # fmt: skip
    assert "the ensemble's scale" in capsys.readouterr().err
    # --bls was dropped without a word where there is no ensemble to add it to
    for engine in (["llamacpp"], ["triton", "--hosted", "llamacpp"]):
        out = tmp_path / "bls"
        assert main(["plan", "--engine", *engine, "--model", "gemma-3-270m", "--bls",
                     "--quant", "gguf-q8_0", "--out", str(out)]) == 2  # fmt: skip
        assert "--bls adds a model to Triton's TensorRT-LLM ensemble" in capsys.readouterr().err
        assert not out.exists()


def test_plan_vllm_writes_engine_args(tmp_path: Path) -> None:
    assert main(["plan", "--engine", "triton", "--hosted", "vllm", "--model", "gemma-3-270m",
                 "--max-concurrency", "128", "--instances", "2", "--no-cuda-graphs",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    cfg = triton.parse_config((tmp_path / "triton_model_repo/vllm/config.pbtxt").read_text())
    args = json.loads(cfg.parameters["engine_args"].string_value)
    assert (args["max_num_seqs"], args["enforce_eager"], args["tensor_parallel_size"]) == (
        128,
        True,
        1,
    )
    assert cfg.instance_group[0].count == 2
    assert "tritonserver" in (tmp_path / "serve.sh").read_text()
    # what `vllm serve` would get from crossover's plan, not the in-process defaults
    assert (args["max_num_batched_tokens"], args["gpu_memory_utilization"]) == (8192, 0.9)
    assert "load_format" not in args


def test_plan_vllm_load_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--engine", "triton", "--hosted", "vllm", "--model", "gemma-3-270m",
                 "--load-format", "dummy", "--out", str(tmp_path / "t")]) == 0  # fmt: skip
    cfg = triton.parse_config((tmp_path / "t/triton_model_repo/vllm/config.pbtxt").read_text())
    assert json.loads(cfg.parameters["engine_args"].string_value)["load_format"] == "dummy"
    assert main(["plan", "--engine", "vllm", "--model", "gemma-3-270m",
                 "--load-format", "dummy", "--out", str(tmp_path / "v")]) == 0  # fmt: skip
    assert "--load-format dummy" in (tmp_path / "v/serve.sh").read_text()
    assert main(["plan", "--engine", "llamacpp", "--model", "gemma-3-270m",
                 "--load-format", "dummy", "--out", str(tmp_path / "l")]) == 2  # fmt: skip
    assert "--load-format is for vLLM" in capsys.readouterr().err


# --- the vLLM model against fakes -------------------------------------------------------


@dataclass
class FakeTensor:
    name: str
    value: Any

    def as_numpy(self) -> Any:
        return self.value


@dataclass
class FakeSender:
    sent: list[tuple[Any, int]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def send(self, response: Any = None, flags: int = 0) -> None:
        self.sent.append((response, flags))
        if flags == FINAL:
            self.done.set()


@dataclass
class FakeRequest:
    inputs: dict[str, Any]
    sender: FakeSender = field(default_factory=FakeSender)

    def get_response_sender(self) -> FakeSender:
        return self.sender


def _fake_pb() -> tuple[ModuleType, dict[str, float]]:
    counters: dict[str, float] = {}
    pb = ModuleType("triton_python_backend_utils")

    class Metric:
        def __init__(self, labels: dict[str, str]) -> None:
            self.key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

        def increment(self, n: float) -> None:
            counters[self.key] = counters.get(self.key, 0.0) + n

    class MetricFamily:
        COUNTER = "counter"

        def __init__(self, name: str, description: str, kind: str) -> None:
            assert name == "crossover_generated_tokens_total" and kind == "counter"

        def Metric(self, labels: dict[str, str]) -> Metric:
            return Metric(labels)

    def get_input_tensor_by_name(request: FakeRequest, name: str) -> FakeTensor | None:
        if name not in request.inputs:
            return None
        return FakeTensor(name, np.array([request.inputs[name]]))

    pb.MetricFamily = MetricFamily  # type: ignore[attr-defined]
    pb.Tensor = FakeTensor  # type: ignore[attr-defined]
    pb.InferenceResponse = lambda output_tensors, error=None: SimpleNamespace(  # type: ignore[attr-defined]
        tensors={t.name: t.value for t in output_tensors}, error=error
    )
    pb.TritonError = lambda message: message  # type: ignore[attr-defined]
    pb.get_input_tensor_by_name = get_input_tensor_by_name  # type: ignore[attr-defined]
    pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL = FINAL  # type: ignore[attr-defined]
    return pb, counters


class FakeEngine:
    """Streams "w0 w1 ..." one token per step, as vLLM's RequestOutput does: the whole
    output so far at each step (its default), or, where the parameters ask for
    increments (``kind``, as ``RequestOutputKind``), only the step's token for a stream
    and only the final output otherwise."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.stopped = False

    async def generate(self, prompt: str, params: Any, request_id: str) -> AsyncIterator[Any]:
        n = params.max_tokens
        kind = getattr(params, "kind", "whole")
        for i in range(1, n + 1):
            completion = SimpleNamespace(
                text="".join(f"w{k} " for k in range(i)), token_ids=list(range(i))
            )
            if kind == "final" and i < n:
                continue
            if kind == "delta":
                completion = SimpleNamespace(text=f"w{i - 1} ", token_ids=[i - 1])
            yield SimpleNamespace(
                outputs=[completion], prompt_token_ids=[0] * len(prompt.split()),
                finished=i == n,
            )  # fmt: skip

    def shutdown(self) -> None:
        self.stopped = True


def _params(g: Any, increments: bool) -> tuple[Any, bool]:
    """The model's sampling_params without vLLM: the request itself, with the kind of
    output asked for (as the real one asks: increments for a stream, else the final)."""
    if not increments:
        return g, False
    return SimpleNamespace(max_tokens=g.max_tokens, kind="delta" if g.stream else "final"), True


@pytest.fixture(params=[False, True], ids=["whole", "increments"])
def vllm_model(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[tuple[Any, Any, str]]:
    pb, counters = _fake_pb()
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    files = repository("vllm", "vllm", vllm_parameters({"model": "/m"}, 5), 1)
    write_repository(tmp_path, files)
    monkeypatch.syspath_prepend(str(tmp_path / "vllm" / "1"))
    mod = load_script(tmp_path / "vllm/1/model.py", "vllm_model")
    monkeypatch.setattr(mod, "make_engine", FakeEngine)
    increments = bool(request.param)  # vLLM is not installed here
    monkeypatch.setattr(mod, "sampling_params", lambda g: _params(g, increments))
    model = mod.TritonPythonModel()
    config = triton.parse_config(files["vllm/config.pbtxt"])
    from google.protobuf import json_format

    model_config = json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True))
    model.initialize(
        {"model_config": model_config, "model_name": "vllm", "model_instance_name": "vllm_0_0"}
    )
    printed = capsys.readouterr().out
    yield model, counters, printed
    model.finalize()
    assert model.engine.stopped


def _wait(*requests: FakeRequest) -> None:
    deadline = time.monotonic() + 10
    for r in requests:
        assert r.sender.done.wait(max(0.0, deadline - time.monotonic()))


def test_vllm_model_streams_counts_and_counts_tokens(vllm_model: tuple[Any, Any, str]) -> None:
    model, counters, printed = vllm_model
    assert model.engine.args == {"model": "/m"}
    line = next(ln for ln in printed.splitlines() if "crossover-triton-model" in ln)
    body = json.loads(line.split(":", 1)[1])
    assert body["engine"] == "vllm" and body["triton"]["decoupled"] is True
    a = FakeRequest({"text_input": b"one two three", "max_tokens": 4, "min_tokens": 4,
                     "return_num_output_tokens": True, "return_num_input_tokens": True})  # fmt: skip
    b = FakeRequest({"text_input": b"x", "stream": False})
    model.execute([a, b])  # returns at once: decoupled
    _wait(a, b)
    texts = [r.tensors["text_output"][0].decode() for r, _ in a.sender.sent]
    assert "".join(texts) == "w0 w1 w2 w3 "
    assert [f for _, f in a.sender.sent] == [0, 0, 0, FINAL]
    last = a.sender.sent[-1][0].tensors
    assert (int(last["num_output_tokens"][0]), int(last["num_input_tokens"][0])) == (4, 3)
    (only, flags), = b.sender.sent  # fmt: skip
    assert flags == FINAL and only.tensors["text_output"][0].decode().count("w") == 5
    assert "num_output_tokens" not in only.tensors  # not asked
    assert counters == {"instance=vllm_0_0,model=vllm": 9.0}


def test_vllm_model_refuses_bad_requests(vllm_model: tuple[Any, Any, str]) -> None:
    model, counters, _ = vllm_model
    bad = [FakeRequest({"max_tokens": 3}), FakeRequest({"text_input": b"x", "max_tokens": 0})]
    model.execute(bad)
    _wait(*bad)
    errors = [r.sender.sent[-1][0].error for r in bad]
    assert errors == ["text_input is missing", "max_tokens must be >= 1, got 0"]
    assert counters == {}


def _fake_llama_cpp() -> ModuleType:
    """llama-cpp-python's surface the model's ``initialize`` reads (no library loaded)."""
    fake = ModuleType("llama_cpp")

    class Llama:
        def __init__(self, **settings: Any) -> None:
            self.n_threads = settings["n_threads"]
            self._ctx = settings["n_ctx"]
            self._model = SimpleNamespace(vocab="vocab")

        def n_vocab(self) -> int:
            return 8

        def n_ctx(self) -> int:
            return self._ctx

    fake.Llama = Llama  # type: ignore[attr-defined]
    fake.llama_vocab_is_eog = lambda vocab, t: t == 7  # type: ignore[attr-defined]
    fake.__version__ = "0.0-fake"  # type: ignore[attr-defined]
    return fake


def test_the_llamacpp_models_settings_line_reads_back_through_its_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model names its engine as its config.pbtxt says (the spec's name), and
    verify-config maps the line's settings with that spec's table."""
    from google.protobuf import json_format

    from crossover.engines.logs_triton import read_triton_log
    from crossover.plan.triton_hosted import llamacpp_parameters

    pb, _ = _fake_pb()
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    monkeypatch.setitem(sys.modules, "llama_cpp", _fake_llama_cpp())
    params = llamacpp_parameters("/m.gguf", "", "", n_ctx=1024, n_threads=3)
    files = repository("llamacpp", "gemma", params, 1)
    write_repository(tmp_path, files)
    monkeypatch.syspath_prepend(str(tmp_path / "gemma" / "1"))
    mod = load_script(tmp_path / "gemma/1/model.py", "llamacpp_model")
    config = triton.parse_config(files["gemma/config.pbtxt"])
    model_config = json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True))
    mod.TritonPythonModel().initialize(
        {"model_config": model_config, "model_name": "gemma", "model_instance_name": "gemma_0_0"}
    )
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "crossover-triton-model" in ln)
    assert json.loads(line.split(":", 1)[1])["engine"] == "llamacpp"
    facts = read_triton_log([line])
    got = {k: facts[k].value for k in ("hosted_engine", "context_tokens", "threads", "model")}
    assert got == {
        "hosted_engine": "llamacpp",
        "context_tokens": 1024,
        "threads": 3,
        "model": "/m.gguf",
    }
    assert facts["decoupled"].value is True


ROOT = Path(__file__).resolve().parents[2]


def _example_ports(text: str) -> set[int]:
    """The ports a document's examples use: ``HOST:PORT`` in a URL or ``--port N``."""
    import re

    found = re.findall(r"(?:127\.0\.0\.1|localhost|host[\w-]*):(\d{2,5})\b|--port[ =](\d+)", text)
    return {int(a or b) for a, b in found}


def test_the_docs_triton_example_says_its_ports_and_collides_with_no_other_example(
    tmp_path: Path,
) -> None:
    """docs/triton.md's serve.sh example: the ports its comment and curl name are the ones
    the plan it shows writes, and no other README or docs example uses them (its metrics
    port was 8002, the README's ``batched`` calibration server's)."""
    import re
    import shlex

    doc = (ROOT / "docs" / "triton.md").read_text()
    block = doc.split("## Serve an engine in the Python backend", 1)[1].split("```")[1]
    command = shlex.split(block.split("plan-triton/serve.sh")[0].replace("\\\n", " "))
    assert command[:2] == ["crossover", "plan"]
    args = command[1:]
    args[args.index("--model") + 1] = "gemma-3-270m"  # its ports do not depend on the file
    args[args.index("--out") + 1] = str(tmp_path / "plan-triton")
    assert main(args) == 0
    serve = (tmp_path / "plan-triton" / "serve.sh").read_text()
    http = int(re.findall(r"--http-port=(\d+)", serve)[0])
    metrics = int(re.findall(r"--metrics-port=(\d+)", serve)[0])
    said = re.search(r"tritonserver on :(\d+), metrics on :(\d+)", block)
    assert said is not None and (int(said[1]), int(said[2])) == (http, metrics)
    assert f"curl -N localhost:{http}/" in block
    others = (ROOT / "README.md").read_text() + "".join(
        p.read_text() for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "triton.md"
    )
    assert not {http, metrics} & _example_ports(others)
