"""Bad input ends in one clear line and exit status 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.sweep.config import build_sweep_config, load_sweep_config
from tests.errlines import one_line_error

SWEEP_A = ["sweep", "--out", "/tmp/x-sweep", "--target", "A=http://127.0.0.1:9,model=m",
           "--concurrency", "1", "--output-tokens", "4"]  # fmt: skip
PLAN = ["plan", "--engine", "vllm", "--model", "llama-3.1-8b", "--out", "/tmp/x-plan"]
RUN = ["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "8"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--model", "m", "--output-tokens", "8", "--concurrency", "1"], "--url"),
        ([*RUN[:2], "ftp://x", *RUN[3:], "--concurrency", "1"], "not an http(s) URL"),
        ([*RUN, "--concurrency", "0"], "--concurrency"),
        ([*RUN, "--concurrency", "two"], "valid integer"),
        ([*RUN], "--concurrency or --rate"),
        ([*RUN, "--concurrency", "2", "--rate", "3"], "--concurrency or --rate"),
        ([*RUN, "--concurrency", "2", "--engine", "nope"], "unknown engine"),
        ([*RUN, "--concurrency", "2", "--slo", "ttft_ms"], "expected METRIC.STAT=LIMIT"),
        ([*RUN, "--concurrency", "2", "--slo", "speed=3"], "unknown metric 'speed'"),
        ([*RUN, "--rate", "0"], "--rate: Input should be greater than 0"),
        ([*RUN, "--concurrency", "2", "--timeout-s", "0"], "--timeout-s: Input should be"),
        ([*RUN, "--concurrency", "2", "--warmup", "-1"], "--warmup: Input should be"),
        ([*RUN, "--concurrency", "2", "--requests", "4", "--duration-s", "3"], "not both"),
        ([*RUN, "--concurrency", "2", "--endpoint", "chat", "--engine", "triton"], "chat"),
        ([*RUN, "--concurrency", "2"], "cannot reach"),
        ([*RUN, "--concurrency", "2", "--tokenizer", "/no/such/tok"], "--tokenizer"),
        ([*RUN, "--concurrency", "2", "--metrics-url", "nope"], "--metrics-url"),
        ([*RUN, "--concurrency", "2", "--max-event-bytes", "10"], "--max-event-bytes"),
        ([*RUN, "--concurrency", "2", "--transport", "curl"], "--transport: expected aiohttp"),
        ([*RUN, "--concurrency", "2", "--workers", "auto2"], "--workers"),
        # a distribution's mistake is named by the flag it was given to (errors.FieldError)
        ([*RUN[:-1], "uniform:9", "--concurrency", "2"], "--output-tokens: length 'uniform:9'"),
        ([*RUN, "--concurrency", "2", "--input-tokens", "normal:5"], "--input-tokens: length"),
        ([*RUN, "--concurrency", "2", "--shared-prefix", "3y"], "--shared-prefix: shared prefix"),
        (["sweep", "--out", "/tmp/x-sweep"], "--config"),
        (["sweep", "--out", "/tmp/x-sweep", "--target", "A"], "NAME=URL"),
        (["sweep", "--out", "/tmp/x-sweep", "--config", "/no/such.yaml"], "does not exist"),
        ([*SWEEP_A, "--workers", "many"], "--workers: expected a number or auto, got 'many'"),
        # a comma list of levels: an empty item or a level below 1 is refused, not skipped
        ([*SWEEP_A[:-4], "--concurrency", "1,,2", "--output-tokens", "4"], "empty item"),
        ([*SWEEP_A[:-4], "--rates", "2,0", "--output-tokens", "4"], "--rates: each item"),
        (["calibrate", "--concurrency", "1,", "--no-cache"], "--concurrency: empty item"),
        (
            ["advise", "--model", "llama-3.1-8b", "--gpu", "H200", "--concurrency", "1,,64"],
            "empty item",
        ),
        (["advise", "--model", "llama-3.1-8b", "--gpu", "H200", "--concurrency", "0,8"], "above 0"),
        ([*PLAN, "--port", "0"], "--port 0: not a TCP port; give 1 to 65535"),
        ([*PLAN, "--port", "65536"], "--port 65536: not a TCP port"),
        (["summarize", "/no/such.db"], "no such database"),
        (["nope"], "No such command"),
    ],
)
def test_bad_flags(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert needle in one_line_error(capsys)


def test_unwritable_output_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([*RUN, "--concurrency", "1", "--out", str(blocker / "sub")]) == 2
    assert "cannot create output folder" in one_line_error(capsys)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("concurrency: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "mapping"),
        ("concurrency: [1]\noutput_tokens: 4\n", "targets"),
        (
            "concurrency: [0]\noutput_tokens: 4\ntargets: [{name: a, url: 'http://h', model: m}]\n",
            "at least 1",
        ),
        ("concurrency: [1]\noutput_tokens: 4\ntargets: [{name: a}]\n", "url or launch"),
        (
            "concurrency: [1]\noutput_tokens: 4\nbogus: 1\n"
            "targets: [{name: a, url: 'http://h', model: m}]\n",
            "bogus",
        ),
        (
            "concurrency: [1]\noutput_tokens: 4\ntargets: [{name: a, url: 'http://h', model: m},"
            " {name: a, url: 'http://h', model: m}]\n",
            "unique",
        ),
    ],
)
def test_bad_sweep_files(
    tmp_path: Path, content: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(content)
    assert main(["sweep", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    assert needle in one_line_error(capsys)


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("p.jsonl", '{"prompt": "a"}\nnot json\n', ":2: not JSON"),
        ("p.jsonl", '{"text2": "a"}\n', "no string field"),
        ("p.jsonl", "\n\n", "no prompts"),
        ("p.json", '{"a": 1}', "list of conversations"),
        ("p.json", '[{"id": 1}]', "no 'conversations'"),
        ("p.json", "[1,", "not JSON"),
    ],
)
def test_bad_prompt_files(tmp_path: Path, name: str, content: str, needle: str) -> None:
    from crossover.workload import read_texts

    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UsageError, match=needle.replace("(", r"\(")):
        read_texts(path)


def test_sharegpt_and_jsonl_are_read(tmp_path: Path) -> None:
    from crossover.workload import read_texts

    sg = tmp_path / "sg.json"
    sg.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "hi there"},
                        {"from": "gpt", "value": "hello"},
                    ]
                }
            ]
        )
    )
    assert read_texts(sg) == ["hi there"]
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"prompt": "one"}\n"two"\n')
    assert read_texts(jl) == ["one", "two"]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 300)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
sweep_keys = st.sampled_from(
    [
        "name",
        "targets",
        "concurrency",
        "requests_per_level",
        "output_tokens",
        "input_tokens",
        "repeats",
        "refine",
        "seed",
        "timeouts",
        "endpoint",
        "warmup_requests",
    ]
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(sweep_keys, json_values, max_size=8))
def test_random_sweep_configs_validate_or_fail_cleanly(data: dict[str, Any]) -> None:
    try:
        build_sweep_config(data)
    except UsageError as exc:
        assert "\n" not in str(exc)  # noqa: PT017 - valid, or one clear line


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(sweep_keys, json_values, max_size=8))
def test_random_sweep_files(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("cfg") / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_sweep_config(path)
    except UsageError:
        pass


run_keys = st.sampled_from(
    [
        "url",
        "engine",
        "model",
        "concurrency",
        "rate_rps",
        "requests",
        "duration_s",
        "output_tokens",
        "input_tokens",
        "slo",
        "workers",
        "endpoint",
        "timeouts",
    ]
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(run_keys, json_values, max_size=8))
def test_random_run_configs_validate_or_fail_cleanly(data: dict[str, Any]) -> None:
    from crossover.cli.common import validated
    from crossover.spec.run import RunConfig

    try:
        validated(RunConfig, **data)
    except UsageError as exc:
        assert "\n" not in str(exc)  # noqa: PT017 - valid, or one clear line


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/v2"])
def test_a_url_with_the_api_path_gets_a_hint(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://127.0.0.1:9" + suffix
    assert (
        main(["run", "--url", url, "--model", "m", "--output-tokens", "8", "--concurrency", "1"])
        == 2
    )
    line = one_line_error(capsys)
    assert "base URL" in line and "'http://127.0.0.1:9'" in line
    out = tmp_path / "o"
    args = ["sweep", "--out", str(out), "--target", f"a={url}", "--model", "m"]
    assert main([*args, "--concurrency", "1", "--output-tokens", "4"]) == 2
    assert "base URL" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("port", ["99999", "-5", "0", "abc"])
def test_a_url_whose_port_is_no_tcp_port_is_refused(
    port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was "cannot reach ...: Connection refused" (99999) or "Servname not supported"
    (-5), as if a server were down; quality's --reference exited 1."""
    url = f"http://127.0.0.1:{port}"
    want = f"'{url}': the port is not a TCP port; give 1 to 65535"
    args = ["--model", "m", "--output-tokens", "4", "--concurrency", "1"]
    assert main(["run", "--url", url, *args]) == 2
    assert want in one_line_error(capsys)
    out = tmp_path / "o"
    assert main(["sweep", "--out", str(out), "--target", f"a={url}", *args]) == 2
    assert want in one_line_error(capsys)
    assert not out.exists()
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    quality = ["quality", "--reference", f"r={url}", "--candidate", "c=http://127.0.0.1:9"]
    assert main([*quality, "--prompts", str(prompts)]) == 2
    assert want in one_line_error(capsys)
