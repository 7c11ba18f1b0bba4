"""The tie margin (``compare_pair(tie_rel=...)``, ``crossover decide --tie-margin``): means
within the margin of each other are level, neither a lead nor a sign. Two H200 sessions
measured vLLM, SGLang and llama.cpp at c = 1 within 0.3-3% of each other, the gaps' signs
opposite between the machines, and the analysis read one as a lead and the other as
"inconclusive" (docs/results/h200/moe-decide)."""

from __future__ import annotations

from crossover.analysis.crossovers import compare_pair, format_crossover, metric_spec

TPS = metric_spec("total_tokens_per_s")


def test_a_tight_sub_margin_gap_is_a_lead_without_the_margin_and_level_with_it() -> None:
    # c=1: B ahead by 0.5%, the repeats agreeing to 0.05% (significant); c=2: A far ahead
    a = {1.0: [420.0, 420.2], 2.0: [688.0, 690.0], 4.0: [1040.0, 1044.0]}
    b = {1.0: [422.0, 422.2], 2.0: [385.0, 386.0], 4.0: [830.0, 832.0]}
    plain = compare_pair("a", "b", a, b, TPS)
    assert [f.kind for f in plain] == ["crossover"]
    assert (plain[0].below, plain[0].above) == ("b", "a")
    tied = compare_pair("a", "b", a, b, TPS, tie_rel=0.03)
    assert [(f.kind, f.leader) for f in tied] == [("none", "a")]
    assert tied[0].per_level[0].tie and tied[0].per_level[0].lead is None
    assert "level within 3% at 1" in tied[0].reason


def test_a_sign_flip_inside_the_margin_is_no_longer_inconclusive() -> None:
    # c=1: B ahead by 0.6%, not significant (wide repeats); then A ahead, significant
    a = {1.0: [415.0, 425.0], 2.0: [688.0, 690.0], 4.0: [1040.0, 1044.0]}
    b = {1.0: [419.0, 428.0], 2.0: [385.0, 386.0], 4.0: [830.0, 832.0]}
    plain = compare_pair("a", "b", a, b, TPS)
    assert [f.kind for f in plain] == ["inconclusive"]
    tied = compare_pair("a", "b", a, b, TPS, tie_rel=0.03)
    assert [(f.kind, f.leader) for f in tied] == [("none", "a")]


def test_a_sign_change_across_a_tie_is_still_seen() -> None:
    # A ahead (not significant) at 1, level at 2, B ahead (not significant) at 4: the
    # change of sign spans the tie and stays inconclusive over 1-4
    a = {1.0: [110.0, 90.0, 104.0], 2.0: [100.0, 100.5], 4.0: [90.0, 110.0, 96.0]}
    b = {1.0: [100.0, 95.0, 99.0], 2.0: [100.2, 100.4], 4.0: [100.0, 105.0, 104.0]}
    tied = compare_pair("a", "b", a, b, TPS, tie_rel=0.03)
    assert [(f.kind, f.bracket) for f in tied] == [("inconclusive", (1.0, 4.0))]


def test_without_the_margin_nothing_is_a_tie() -> None:
    a = {1.0: [100.0, 100.0], 2.0: [200.0, 200.0]}
    b = {1.0: [100.0, 100.0], 2.0: [199.0, 199.2]}
    for f in compare_pair("a", "b", a, b, TPS):
        assert not any(lv.tie for lv in f.per_level)


def test_a_lead_line_names_the_levels_the_margin_read_as_level() -> None:
    # the lead is at 2 and 4 only: the line that says "a leads b over 1-4" says so
    a = {1.0: [420.0, 420.2], 2.0: [688.0, 690.0], 4.0: [1040.0, 1044.0]}
    b = {1.0: [422.0, 422.2], 2.0: [385.0, 386.0], 4.0: [830.0, 832.0]}
    (tied,) = compare_pair("a", "b", a, b, TPS, tie_rel=0.03)
    assert format_crossover(tied) == (
        "total tokens/s: a leads b over 1-4 concurrent requests (no crossover in the range "
        "measured; level within 3% at 1)"
    )
    # without a tie the line is as it was
    (plain,) = compare_pair("a", "b", {k: v for k, v in a.items() if k > 1}, b, TPS)
    assert format_crossover(plain).endswith(
        "over 2-4 concurrent requests (no crossover in the range measured)"
    )


def test_the_lead_line_reads_the_ties_from_the_finding_not_its_reason() -> None:
    # a finding whose reason was reworded (a replay's, a policy's note) still names its
    # ties: the line is built from the levels the margin read as level
    from dataclasses import replace

    a = {1.0: [420.0, 420.2], 2.0: [688.0, 690.0], 4.0: [1040.0, 1044.0]}
    b = {1.0: [422.0, 422.2], 2.0: [385.0, 386.0], 4.0: [830.0, 832.0]}
    (tied,) = compare_pair("a", "b", a, b, TPS, tie_rel=0.03)
    assert (tied.ties, tied.tie_rel) == ((1.0,), 0.03)
    assert tied.tie_clause == "level within 3% at 1"
    reworded = replace(tied, reason="settled after the first pass")
    assert format_crossover(reworded).endswith(
        "(no crossover in the range measured; level within 3% at 1)"
    )
    # and a reason with a "; " of its own adds no tie clause where there is none
    (plain,) = compare_pair("a", "b", {k: v for k, v in a.items() if k > 1}, b, TPS)
    odd = replace(plain, reason="no crossover; said twice")
    assert format_crossover(odd).endswith("(no crossover in the range measured)")


def test_one_level_compared_reads_as_one_level() -> None:
    # a pair compared at one level only (a rate grid whose other levels were short):
    # "(level 1)" and "at 1", never "1-1"
    (none,) = compare_pair("a", "b", {1.0: [100.0, 101.0]}, {1.0: [100.5, 100.2]}, TPS)
    assert format_crossover(none).endswith("(level 1)")
    (lead,) = compare_pair("a", "b", {1.0: [200.0, 200.2]}, {1.0: [100.0, 100.1]}, TPS)
    assert format_crossover(lead) == (
        "total tokens/s: a leads b at 1 concurrent requests (no crossover in the range measured)"
    )
