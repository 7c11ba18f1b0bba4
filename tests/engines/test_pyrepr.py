"""Reading Python reprs (SGLang's ``ServerArgs(...)`` line) without evaluating them."""

from __future__ import annotations

import pytest

from crossover.engines import pyrepr
from crossover.engines.pyrepr import Call, Raw

from .conftest import LOGS


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("None", None),
        ("True", True),
        ("False", False),
        ("0", 0),
        ("-3", -3),
        ("0.85", 0.85),
        ("1e-05", 1e-05),
        ("'fa3'", "fa3"),
        ('"it\'s"', "it's"),
        (r"'x\'y'", "x'y"),
        (r"'a\nb'", "a\nb"),
        (r"'\u00e9'", "é"),
        ("''", ""),
        ("'{}'", "{}"),  # a JSON string stays a string
        ("[]", []),
        ("[1, 2, 4]", [1, 2, 4]),
        ("(2, 1)", [2, 1]),
        ("[1, [2, 'a,b'], {'k': (3,)}]", [1, [2, "a,b"], {"k": [3]}]),
        ("{}", {}),
        ("{'decode': {'max_bs': 256}}", {"decode": {"max_bs": 256}}),
        ("<Backend.FULL: 'full'>", Raw("<Backend.FULL: 'full'>")),
        ("torch.bfloat16", Raw("torch.bfloat16")),
        ("PhaseConfig(backend='full', max_bs=8)", Call("PhaseConfig", {"backend": "full", "max_bs": 8})),
    ],
)  # fmt: skip
def test_literals(raw: str, value: pyrepr.PyValue) -> None:
    assert pyrepr.literal(raw) == value


def test_keys_inside_quoted_values_are_not_keys() -> None:
    """A regex for ``tp_size=(\\d+)`` would read 2 out of the model path."""
    call = pyrepr.parse_call("ServerArgs(model_path='/m/tp_size=2', tp_size=1, x=\"a, b=3\")")
    assert call is not None
    assert call.kwargs == {"model_path": "/m/tp_size=2", "tp_size": 1, "x": "a, b=3"}


def test_nested_reprs_and_paths() -> None:
    line = (
        "[t] server_args=ServerArgs(a=1, cuda_graph_config=CudaGraphConfig("
        "decode=PhaseConfig(backend='full', max_bs=256, bs=[1, 2, 256]), "
        "prefill=PhaseConfig(backend='disabled', max_bs=None)), b=<E.X: (1, 2)>) trailing"
    )
    call = pyrepr.find_call(line, "ServerArgs")
    assert call is not None
    assert pyrepr.get(call, "cuda_graph_config.decode.max_bs") == 256
    assert pyrepr.get(call, "cuda_graph_config.decode.bs") == [1, 2, 256]
    assert pyrepr.get(call, "cuda_graph_config.prefill.backend") == "disabled"
    assert pyrepr.get(call, "cuda_graph_config.nothing.here") is None
    assert pyrepr.get(call, "a.b") is None  # a step into a number
    assert call.kwargs["b"] == Raw("<E.X: (1, 2)>")
    assert pyrepr.find_call(line, "Nope") is None


@pytest.mark.parametrize("cut", [40, 41, 52, 60])
def test_a_line_cut_short_keeps_the_complete_items(cut: int) -> None:
    line = "ServerArgs(a=1, b='x, y', c=[1, 2, 3], d=Inner(e=5, f=6), g=True)"
    call = pyrepr.parse_call(line[:cut])
    assert call is not None
    assert list(call.kwargs)[:3] == ["a", "b", "c"]
    assert "g" not in call.kwargs  # the unfinished items are left out, never guessed
    assert all(not isinstance(v, Raw) for v in call.kwargs.values())


def test_real_sglang_server_args_line() -> None:
    import gzip

    with gzip.open(LOGS / "sglang-0.5.17-h200-llama3-8b.log.gz", "rt") as f:
        line = next(ln for ln in f if "server_args=ServerArgs(" in ln)
    call = pyrepr.find_call(line, "ServerArgs")
    assert call is not None
    assert len(call.kwargs) > 400 and call.args == ()
    assert call.kwargs["model_path"] == "/root/kit/model"
    assert call.kwargs["mem_fraction_static"] == 0.85
    assert call.kwargs["enable_mixed_chunk"] is False
    assert call.kwargs["model_loader_extra_config"] == "{}"
    assert call.kwargs["msprobe_dump_config"] is None  # the last item: the line ended whole
    assert pyrepr.get(call, "cuda_graph_config.prefill.max_bs") == 8192
    shown = pyrepr.show(pyrepr.get(call, "cuda_graph_config.decode"))
    assert shown.startswith("PhaseConfig(backend='full', max_bs=256, bs=[1, 2, 4")
