"""Session prompts as chat turns: alternating roles on a chat endpoint, one flattened
prompt on completions, the same tokens of content either way."""

from __future__ import annotations

from dataclasses import replace

from crossover.calibration.tokenizer import WordTokenizer
from crossover.dialects import RequestSpec
from crossover.engines.registry import dialect as get_dialect
from crossover.workload.sessions import Sessions, session_prompts, shown


def test_a_turn_carries_its_history_as_alternating_roles() -> None:
    tok = WordTokenizer()
    ps = session_prompts(Sessions(turns=3), 3, 5, 4, seed=1, tokenizer=tok)
    roles = [[r for r, _ in p.messages or ()] for p in ps]
    assert roles == [["user"], ["user", "assistant", "user"], ["user", "assistant"] * 2 + ["user"]]
    for p in ps:
        assert p.messages is not None
        # the flattened text is the messages in order, and both hold the prompt's tokens
        assert p.text.split() == [w for _, c in p.messages for w in c.split()]
        assert sum(len(tok.encode(c)) for _, c in p.messages) == p.tokens
    assert [len(tok.encode(c)) for _, c in ps[2].messages or ()] == [5, 4, 5, 4, 5]


def test_the_chat_body_sends_the_roles_and_completions_the_flat_prompt() -> None:
    (p,) = session_prompts(Sessions(turns=2), 1, 3, 2, seed=0, tokenizer=None, first=1)
    dialect = get_dialect("vllm")
    chat = dialect.body(RequestSpec("m", p.text, 8, "chat", p.messages))
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user"]
    assert [m["content"] for m in chat["messages"]] == [c for _, c in p.messages or ()]
    plain = dialect.body(RequestSpec("m", p.text, 8, "completions", p.messages))
    assert plain["prompt"] == p.text and "messages" not in plain
    one = dialect.body(RequestSpec("m", "hello there", 8, "chat"))
    assert one["messages"] == [{"role": "user", "content": "hello there"}]


def test_a_prompt_keeps_every_field_across_a_process_or_a_resume() -> None:
    import orjson

    from crossover.workload import prompt_of_row, prompt_row

    (p,) = session_prompts(Sessions(turns=2), 1, 3, 2, seed=0, tokenizer=None, first=1)
    p = replace(p, output_tokens=7, prefix_id=1)
    assert prompt_of_row(orjson.loads(orjson.dumps(prompt_row(p)))) == p
    # a row a sweep stored before: the later fields are None
    old = prompt_of_row({"id": 3, "text": "a b", "tokens": 2})
    assert (old.output_tokens, old.messages) == (None, None)


def test_a_stored_spec_reads_with_its_count() -> None:
    """``spec()`` is stored as it is (``1 turns`` included); ``shown`` is how it reads."""
    assert Sessions(turns=1, think_s=0.5).spec() == "1 turns, think 0.5 s"
    assert shown(Sessions(turns=1, think_s=0.5).spec()) == "1 turn, think 0.5 s"
    assert shown(Sessions(turns=3).spec()) == "3 turns, think 0 s"
    assert shown('{"think_s": 0, "turns": 1}') == '{"think_s": 0, "turns": 1}'
