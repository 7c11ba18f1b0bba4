"""A local tokenizer counts a level's streamed texts in one batch (``count_many``): the
same counts, record by record, as encoding each text and each chunk on its own, on text
shaped as a random-weight Llama 3 streams it (random tokens, one chunk each: bytes cut
inside characters, U+FFFD, newlines, empty chunks)."""

from __future__ import annotations

import random

import pytest

from crossover.measure.summary import count_and_retokenize
from crossover.metrics.witness import retokenize
from crossover.models.synth import ensure_synth
from crossover.records.model import RequestRecord
from crossover.workload.tokenizers import HFTokenizer


@pytest.fixture(scope="module")
def llama3() -> HFTokenizer:
    tiny = ensure_synth("tiny-llama", ("hf",))
    assert tiny.hf_dir is not None
    return HFTokenizer(tiny.hf_dir)


def streamed(tok: HFTokenizer, rng: random.Random, index: int, tokens: int) -> RequestRecord:
    """A record as a stream of random token ids decodes it: one chunk a token, a chunk
    empty where the token ends inside a character (vLLM's ``""``)."""
    vocab = tok._tok.get_vocab_size()
    ids: list[int] = []
    chunks: list[str] = []
    text = ""
    for _ in range(tokens):
        ids.append(rng.randrange(vocab) if rng.random() < 0.8 else rng.randrange(300))
        whole = tok.decode(ids)
        keep = whole.rstrip("\ufffd") if rng.random() < 0.5 else whole
        chunks.append(keep[len(text) :] if keep.startswith(text) else "")
        text += chunks[-1]
    return RequestRecord(
        index=index,
        expected_output_tokens=tokens,
        t_send_ns=0,
        t_first_ns=1,
        t_last_ns=tokens,
        t_done_ns=tokens + 1,
        chunk_arrival_ns=list(range(1, tokens + 1)),
        chunk_chars=[len(c) for c in chunks],
        completion_tokens=tokens,
        count_source="usage",
        status=200,
        text=text,
    )


def test_count_many_counts_as_encode(llama3: HFTokenizer) -> None:
    rng = random.Random(0)
    texts = [llama3.decode([rng.randrange(128_000) for _ in range(rng.randint(0, 40))])
             for _ in range(300)]  # fmt: skip
    texts += ["", " ", "\n\n", "\ufffd", "héllo", "<|begin_of_text|>", *texts[:50]]
    want = [len(llama3.encode(t)) for t in texts]
    assert llama3.count_many(texts) == want
    assert llama3.count_many(texts) == want  # again, from what it remembered


def test_text_witness_in_one_batch_as_text_by_text(llama3: HFTokenizer) -> None:
    rng = random.Random(1)
    records = [streamed(llama3, rng, i, rng.choice([1, 2, 16, 64, 256])) for i in range(48)]
    records[3] = records[3].model_copy(update={"count_source": None, "completion_tokens": None})
    by_text = [r.model_copy(deep=True) for r in records]
    done: list[int] = []
    retokenize(by_text, llama3.encode, done, None)  # as before: a call per text and chunk
    batched = [r.model_copy(deep=True) for r in records]
    changed = count_and_retokenize(batched, llama3)  # count_many
    assert [(r.stream_tokens, r.chunk_text_tokens) for r in batched] == [
        (r.stream_tokens, r.chunk_text_tokens) for r in by_text
    ]
    assert sum(r.chunk_text_tokens is not None for r in batched) > 30
    assert [r.index for r in changed] == [3] + [r.index for r in records if r.index != 3]


def test_a_failing_batch_counts_request_by_request() -> None:
    """A batch that raises (a text the tokenizer refuses) falls back to a count per
    request: the requests counted keep their counts, only the one refused lacks them,
    and the refusal is raised once all were tried (the caller knows which by ``done``)."""

    def fails(texts: list[str]) -> list[int]:
        raise ValueError("gone")

    def encode(text: str) -> list[int]:
        if "x" in text:
            raise ValueError("refused")
        return list(text.encode())

    def record(index: int, text: str) -> RequestRecord:
        return RequestRecord(index=index, expected_output_tokens=2, t_send_ns=0,
                             chunk_arrival_ns=[1, 2], chunk_chars=[1, len(text) - 1],
                             completion_tokens=2, count_source="usage", status=200,
                             text=text)  # fmt: skip

    records = [record(0, "ab"), record(1, "xy"), record(2, "cde"), record(3, "fx")]
    done: list[int] = []
    with pytest.raises(ValueError, match="refused"):
        retokenize(records, encode, done, None, fails)
    assert done == [0, 2]
    assert [(r.stream_tokens, r.chunk_text_tokens) for r in records] == [
        (2, 2), (None, None), (3, 3), (None, None),
    ]  # fmt: skip


def test_a_failing_batch_keeps_the_counts_of_a_level() -> None:
    """Through the level's counting (``count_and_retokenize``): a local tokenizer whose
    batch fails still witnesses every request its ``encode`` counts."""

    class Refuses:
        name = "refuses"

        def encode(self, text: str) -> list[int]:
            return list(text.encode())

        def decode(self, ids: list[int]) -> str:
            return bytes(ids).decode()

        def count_many(self, texts: list[str]) -> list[int]:
            raise ValueError("batch gone")

    records = [
        RequestRecord(index=i, expected_output_tokens=3, t_send_ns=0, chunk_arrival_ns=[1],
                      chunk_chars=[3], completion_tokens=3, count_source="usage",
                      status=200, text="abc")
        for i in range(3)
    ]  # fmt: skip
    changed = count_and_retokenize(records, Refuses())
    assert [r.index for r in changed] == [0, 1, 2]
    assert [r.stream_tokens for r in records] == [3, 3, 3]
