"""The calibration server's tokenizer: one token per whitespace-separated word.

Deterministic and dependency-free, so a client can count exactly what the server counts.
A chat request adds ``chat_template_tokens`` for the template, as real chat templates do:
the same text sent to ``/v1/completions`` and ``/v1/chat/completions`` reports different
``prompt_tokens``. Ids are hashes, so ``/detokenize`` answers from a ``Vocabulary`` of
the words the server has seen (at most one word per id).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

VOCAB_SIZE = 32_000
# ids below this are reserved for template tokens
_FIRST_WORD_ID = 16


def token_ids(text: str) -> list[int]:
    """Stable ids for the words of ``text`` (crc32 of the word, folded into the vocabulary)."""
    span = VOCAB_SIZE - _FIRST_WORD_ID
    return [_FIRST_WORD_ID + zlib.crc32(w.encode()) % span for w in text.split()]


def count_tokens(text: str) -> int:
    return len(text.split())


def _content_text(content: object) -> str:
    """Text of a chat message's content: a string or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p]
        return " ".join(parts)
    return ""


def chat_text(messages: Iterable[object]) -> str:
    return " ".join(_content_text(m.get("content")) for m in messages if isinstance(m, Mapping))


def chat_template_count(messages: list[object], template_tokens: int, per_message: int) -> int:
    """The template's tokens around ``messages``: ``template_tokens``, and ``per_message``
    more for each message after the first."""
    return template_tokens + per_message * max(0, len(messages) - 1)


def chat_token_ids(messages: Iterable[object], template_tokens: int) -> list[int]:
    """Template tokens (ids 1..) followed by the words of every message."""
    template = [1 + i % (_FIRST_WORD_ID - 1) for i in range(template_tokens)]
    return template + token_ids(chat_text(messages))


def prompt_token_count(prompt: object) -> int | None:
    """Tokens in a completions ``prompt``: text, token ids, or a one-element list of text.

    None when the prompt has a shape this server does not accept.
    """
    if isinstance(prompt, str):
        return count_tokens(prompt)
    if isinstance(prompt, list):
        if all(isinstance(t, int) for t in prompt):
            return len(prompt)
        if len(prompt) == 1 and isinstance(prompt[0], str):
            return count_tokens(prompt[0])
        if len(prompt) == 1 and isinstance(prompt[0], list):
            return prompt_token_count(prompt[0])
    return None


def prompt_key_tokens(prompt: object) -> tuple[str, ...]:
    """A completions ``prompt``'s tokens as text (words, or ids written out), in order."""
    if isinstance(prompt, str):
        return tuple(prompt.split())
    if isinstance(prompt, list):
        if all(isinstance(t, int) for t in prompt):
            return tuple(str(t) for t in prompt)
        if len(prompt) == 1:
            return prompt_key_tokens(prompt[0])
    return ()


class Vocabulary:
    """The words seen so far, by id: what lets ``/detokenize`` invert ``/tokenize``.

    Two words with the same id (a hash collision) decode to the later one: still one
    word per token, so counts survive a round trip. An unknown id decodes to ``unk``.
    """

    def __init__(self) -> None:
        self._words: dict[int, str] = {}

    def learn(self, text: str) -> list[int]:
        """``token_ids(text)``, remembering each id's word."""
        words = text.split()
        ids = token_ids(text)
        self._words.update(zip(ids, words, strict=True))
        return ids

    def text(self, ids: Iterable[int]) -> str:
        """The words of ``ids`` joined by spaces; template ids (below the first word id)
        decode to nothing."""
        return " ".join(self._words.get(i, "unk") for i in ids if i >= _FIRST_WORD_ID)


class WordTokenizer:
    """The calibration server's tokenizer on the client's side (a ``Tokenizer``): counts
    exactly what the server counts, without a round trip to its ``/tokenize``."""

    name = "calibration:words"

    def __init__(self) -> None:
        self._vocabulary = Vocabulary()

    def encode(self, text: str) -> list[int]:
        return self._vocabulary.learn(text)

    def decode(self, ids: list[int]) -> str:
        return self._vocabulary.text(ids)
