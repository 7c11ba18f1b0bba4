from __future__ import annotations

from pathlib import Path

import pytest

from crossover.calibration.tokenizer import WordTokenizer
from crossover.errors import UsageError
from crossover.spec.run import RunConfig
from crossover.workload.trace import read_trace, trace_prompts

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trace-sample.jsonl"


def test_sample_trace_reads_and_scales() -> None:
    tr = read_trace(SAMPLE)
    assert len(tr.requests) == 40
    offs = tr.offsets_ns()
    assert offs[0] == 0 and offs == sorted(offs)
    span = tr.requests[-1].timestamp_ms - tr.requests[0].timestamp_ms
    assert offs[-1] == int(span * 1e6)
    assert tr.offsets_ns(4.0)[-1] == int(span * 1e6 / 4.0)
    assert tr.mean_rate(2.0) == pytest.approx(2.0 * tr.mean_rate(1.0))


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "not a JSON object"),
        ('{"timestamp": -1, "input_length": 5, "output_length": 5}', "'timestamp'"),
        ('{"timestamp": 1, "input_length": 0, "output_length": 5}', "'input_length'"),
        ('{"timestamp": 1, "input_length": 5}', "'output_length'"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 5, "hash_ids": ["a"]}', "hash_ids"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, line: str, says: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 5, "output_length": 5}\n' + line + "\n")
    with pytest.raises(UsageError, match=r"t\.jsonl:2: ") as err:
        read_trace(f)
    assert says in str(err.value)


def test_time_going_back_and_empty_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(
        '{"timestamp": 5, "input_length": 5, "output_length": 5}\n'
        '{"timestamp": 4, "input_length": 5, "output_length": 5}\n'
    )
    with pytest.raises(UsageError, match="must not go back"):
        read_trace(f)
    f.write_text("\n")
    with pytest.raises(UsageError, match="no requests"):
        read_trace(f)


def test_prompts_share_the_blocks_they_name_and_fit_their_lengths() -> None:
    tr = read_trace(SAMPLE)
    tok = WordTokenizer()
    ps = trace_prompts(tr, 40, seed=0, tokenizer=tok, block_tokens=512)
    for p, r in zip(ps, tr.requests, strict=True):
        assert p.tokens == r.input_length == len(tok.encode(p.text))
        assert p.output_tokens == r.output_length
    # requests 0 and 2 both start with block 0: their first 512 words are the same text
    assert tr.requests[0].hash_ids[0] == tr.requests[2].hash_ids[0] == 0
    assert ps[0].text.split()[:512] == ps[2].text.split()[:512]
    assert ps[0].text.split()[:512] != ps[1].text.split()[:512]  # block 10, not 0
    # cycled past the end: request 40 is request 0's lengths again, its own words
    more = trace_prompts(tr, 2, seed=0, tokenizer=tok, block_tokens=512, first=40)
    assert more[0].output_tokens == ps[0].output_tokens and more[0].tokens == ps[0].tokens


def test_run_config_takes_its_load_from_the_trace() -> None:
    c = RunConfig(url="http://h:1", model="m", trace=SAMPLE, trace_speed=2.0)  # type: ignore[call-arg]
    tr = read_trace(SAMPLE)
    assert c.mode == "rate" and c.requests == 40
    assert c.rate_rps == pytest.approx(tr.mean_rate(2.0))
    assert c.output_tokens == tr.mean_output()
    assert c.trace_offsets_ns() == tr.offsets_ns(2.0)
    assert c.workload_shape()["trace"].endswith("trace-sample.jsonl x2")
    with pytest.raises(ValueError, match="sets its own arrivals"):
        RunConfig(url="http://h:1", model="m", trace=SAMPLE, concurrency=4)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="not with"):
        RunConfig(url="http://h:1", model="m", trace=SAMPLE, shared_prefix="2x8")  # type: ignore[call-arg]
