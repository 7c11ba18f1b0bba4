from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from crossover.spec.run import RunConfig
from crossover.workload import synthetic_prompts
from crossover.workload.shape import LengthDist, parse_length, parse_shared_prefix


@pytest.mark.parametrize(
    ("text", "spec", "nominal"),
    [
        ("256", "256", 256),
        (256, "256", 256),
        ("uniform:64-512", "uniform:64-512", 288),
        ("normal:512,128", "normal:512,128", 512),
        ("lognormal:512,256,16-2048", "lognormal:512,256,16-2048", 512),
        ({"dist": "uniform", "min": 1, "max": 3}, "uniform:1-3", 2),
    ],
)
def test_compact_forms_round_trip(text: object, spec: str, nominal: int) -> None:
    d = parse_length(text)  # type: ignore[arg-type]
    assert d.spec() == spec
    assert parse_length(d.spec()) == d
    assert d.nominal() == nominal


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gamma:3", "use N, uniform:MIN-MAX"),
        ("uniform:9-3", "min is above max"),
        ("uniform:9", "expected MIN-MAX"),
        ("normal:5", "MEAN,SD"),
        ("0", "greater than or equal to 1"),
        ("empirical:/nonexistent/lengths.txt", "cannot read lengths file"),
    ],
)
def test_bad_forms_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=r".") as err:
        parse_length(text)
    assert says in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_draws_are_per_index_and_seed_not_per_call() -> None:
    d = parse_length("lognormal:300,200,8-4000")
    a = [d.draw(0, "output", i) for i in range(50)]
    b = [d.draw(0, "output", i) for i in reversed(range(50))][::-1]
    assert a == b  # order of drawing does not matter
    assert a != [d.draw(1, "output", i) for i in range(50)]  # the seed does
    assert a != [d.draw(0, "input", i) for i in range(50)]  # streams are independent
    assert len(set(a)) > 20


@pytest.mark.parametrize(
    ("text", "mean", "sd"),
    [("normal:400,50", 400, 50), ("lognormal:400,300", 400, 300), ("uniform:100-300", 200, 57.7)],
)
def test_distributions_have_the_stated_moments(text: str, mean: float, sd: float) -> None:
    d = parse_length(text)
    xs = [d.draw(7, "output", i) for i in range(20_000)]
    assert statistics.fmean(xs) == pytest.approx(mean, rel=0.03)
    assert statistics.pstdev(xs) == pytest.approx(sd, rel=0.06)


def test_bounds_clip_and_lognormal_has_a_long_tail() -> None:
    d = parse_length("lognormal:200,400,10-1000")
    xs = [d.draw(0, "input", i) for i in range(5000)]
    assert min(xs) >= 10 and max(xs) <= 1000
    assert xs.count(1000) > 0 and xs.count(10) > 0
    assert statistics.median(xs) < statistics.fmean(xs)  # skewed right


def test_empirical_reads_lines_or_a_json_list(tmp_path: Path) -> None:
    lines = tmp_path / "l.txt"
    lines.write_text("5\n7\n\n9\n")
    js = tmp_path / "l.json"
    js.write_text("[5, 7, 9]")
    for f in (lines, js):
        d = parse_length(f"empirical:{f}")
        assert set(d.draw(0, "output", i) for i in range(200)) == {5, 7, 9}
        assert d.nominal() == 7
    bad = tmp_path / "bad.txt"
    bad.write_text("5\nseven\n")
    with pytest.raises(ValueError, match="one integer per line"):
        parse_length(f"empirical:{bad}")


def test_shared_prefix_patterns() -> None:
    rr = parse_shared_prefix("3x64")
    assert [rr.prefix_of(0, i) for i in range(6)] == [0, 1, 2, 0, 1, 2]
    rnd = parse_shared_prefix("3x64:random")
    picks = [rnd.prefix_of(0, i) for i in range(300)]
    assert set(picks) == {0, 1, 2} and picks != [i % 3 for i in range(300)]
    assert rnd.spec() == "3x64:random" and rr.spec() == "3x64"
    for bad in ("3", "x64", "3x64:sometimes", "0x64"):
        with pytest.raises(ValueError, match="PREFIXESxTOKENS"):
            parse_shared_prefix(bad)


class Words:
    """One token per space-separated word (the calibration server's tokenizer's rule)."""

    name = "words"

    def encode(self, text: str) -> list[int]:
        return [hash(w) for w in text.split()]

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError


def test_prompts_get_their_own_lengths_and_share_prefix_text() -> None:
    from crossover.calibration.tokenizer import WordTokenizer

    tok = WordTokenizer()
    shape = dict(
        input_lengths=parse_length("uniform:5-40"),
        output_lengths=parse_length("uniform:1-9"),
        shared_prefix=parse_shared_prefix("2x30"),
    )
    ps = synthetic_prompts(12, 20, seed=3, tokenizer=tok, **shape)  # type: ignore[arg-type]
    again = synthetic_prompts(4, 20, seed=3, tokenizer=tok, first=8, **shape)  # type: ignore[arg-type]
    assert ps[8:] == again  # prompt i is the same whatever else was asked
    inp = shape["input_lengths"]
    assert isinstance(inp, LengthDist)
    for p in ps:
        want = 30 + inp.draw(3, "input", p.id)
        assert p.tokens == want == len(tok.encode(p.text))
        assert p.output_tokens is not None and 1 <= p.output_tokens <= 9
        assert p.prefix_id == p.id % 2
    heads = {p.prefix_id: " ".join(p.text.split()[:30]) for p in ps}
    assert len(set(heads.values())) == 2
    assert all(" ".join(p.text.split()[:30]) == heads[p.prefix_id] for p in ps)
    assert len({p.text for p in ps}) == 12  # the rest is each prompt's own


def test_run_config_takes_a_distribution_for_either_length() -> None:
    c = RunConfig(
        url="http://h:1", model="m", concurrency=1, output_tokens="uniform:10-30",  # type: ignore[arg-type]
        input_tokens="normal:100,10", shared_prefix="4x512",  # type: ignore[arg-type]
    )  # fmt: skip
    assert (c.output_tokens, c.input_tokens) == (20, 100)
    assert c.workload_shape() == {
        "input_lengths": "normal:100,10",
        "output_lengths": "uniform:10-30",
        "shared_prefix": "4x512",
    }
    fixed = RunConfig(url="http://h:1", model="m", concurrency=1, output_tokens="64")  # type: ignore[arg-type]
    assert fixed.output_tokens == 64 and fixed.workload_shape() == {}
    with pytest.raises(ValueError, match="not both"):
        RunConfig(url="http://h:1", model="m", concurrency=1, output_tokens="uniform:1-2",  # type: ignore[arg-type]
                  output_lengths="uniform:1-3")  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(ValueError, match="not with a prompt file"):
        RunConfig(url="http://h:1", model="m", concurrency=1, output_tokens=8,
                  shared_prefix="2x8", prompts_file=Path("p.jsonl"))  # type: ignore[arg-type]  # fmt: skip
