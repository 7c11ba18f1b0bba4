"""Token counters: the model's own tokenizer, or the server's ``/tokenize``.

``--tokenizer`` takes a local HF tokenizer folder (``tokenizer.json``) or a GGUF
file; without one, engines that expose ``/tokenize`` count for us. Token ids are
encoded without special tokens (BOS etc.): the server's ``usage.prompt_tokens``
may exceed them by a constant, which verification allows for.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from crossover.errors import UsageError


class Tokenizer(Protocol):
    @property
    def name(self) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


#: ``HFTokenizer.count_many`` remembers the counts of texts up to this long (a chunk's),
#: this many at most (then it starts again)
COUNTED_CHARS = 64
COUNTS_KEPT = 1 << 20


class HFTokenizer:
    """A ``tokenizer.json`` through the ``tokenizers`` package (no torch needed)."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer as _Tok
        except ImportError:
            raise UsageError(
                "--tokenizer needs the 'tokenizers' package: pip install 'crossover[tokenizers]'"
            ) from None
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise UsageError(f"no tokenizer.json in {path}")
        try:
            self._tok = _Tok.from_file(str(file))
        except Exception as exc:
            raise UsageError(f"cannot read tokenizer {file}: {exc}") from None
        self.name = f"hf:{path}"
        self._counts: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``len(encode(text))`` of every text, each distinct text encoded once, in one
        batch (``tokenizers``' own threads), short ones remembered across calls: a
        level's streams repeat their chunks' texts, and the next level's repeat them
        again (the text witness, ``crossover.metrics.witness.retokenize``)."""
        known = self._counts
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        found: dict[str, int] = {}
        if todo:
            batch = getattr(self._tok, "encode_batch_fast", None) or self._tok.encode_batch
            encoded = batch(todo, add_special_tokens=False)
            found = {t: len(e.ids) for t, e in zip(todo, encoded, strict=True)}
        out = [known[t] if t in known else found[t] for t in texts]
        if len(known) + len(found) > COUNTS_KEPT:
            known.clear()
        known.update((t, n) for t, n in found.items() if len(t) <= COUNTED_CHARS)
        return out

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))


class GGUFTokenizer:
    """A GGUF file's vocabulary as the ``tokenizer.json`` crossover builds from it (the
    one ``models synth`` and ``models convert`` write: tokenizes as llama.cpp does, and
    built without torch, which transformers 5's own GGUF reader imports), cached per
    file and transformers version."""

    def __init__(self, path: Path) -> None:
        from crossover.models.hf_tokenizer import cached_hf_tokenizer

        try:
            folder = cached_hf_tokenizer(path)
        except UsageError:
            raise
        except Exception as exc:
            raise UsageError(f"cannot read the tokenizer in {path}: {exc}") from None
        self._tok = HFTokenizer(folder)
        self.name = f"gguf:{path}"

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return self._tok.count_many(texts)

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)


class ServerTokenizer:
    """The engine's own ``/tokenize`` + ``/detokenize`` (llama.cpp and vLLM styles)."""

    def __init__(self, base_url: str, model: str, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.name = f"server:{self.base_url}/tokenize"
        #: one keep-alive connection, reused: every request's text is re-tokenized after a
        #: level, and a new connection per call cost more than the call (a sweep's other
        #: target may be measuring on the same machine meanwhile)
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        payload = json.dumps(body).encode()
        with self._lock:
            for attempt in range(2):  # a kept connection the server closed: once more
                conn = self._connection()
                try:
                    conn.request(
                        "POST", self._prefix + path, payload, {"Content-Type": "application/json"}
                    )
                    resp = conn.getresponse()
                    data = resp.read()
                except (http.client.HTTPException, OSError) as exc:
                    conn.close()
                    self._conn = None
                    if attempt:
                        raise OSError(f"{path}: {exc}") from exc
                    continue
                if resp.will_close:
                    conn.close()
                    self._conn = None
                if resp.status != 200:
                    raise ValueError(f"{path} answered HTTP {resp.status}")
                break
        out = json.loads(data)
        if not isinstance(out, dict):
            raise ValueError(f"{path} returned {type(out).__name__}")
        return out

    @property
    def _prefix(self) -> str:
        return urllib.parse.urlsplit(self.base_url).path

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            url = urllib.parse.urlsplit(self.base_url)
            cls = (
                http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
            )
            self._conn = cls(url.netloc, timeout=self.timeout_s)
        return self._conn

    def encode(self, text: str) -> list[int]:
        out = self._post(
            "/tokenize",
            {
                "content": text,
                "prompt": text,
                "model": self.model,
                "add_special": False,
                "add_special_tokens": False,
            },
        )
        tokens = out.get("tokens")
        if not isinstance(tokens, list):
            raise ValueError("/tokenize answered without a token list")
        return [t if isinstance(t, int) else int(t["id"]) for t in tokens]

    def chat_template_tokens(self, text: str | Sequence[tuple[str, str]]) -> int | None:
        """Tokens the server's chat template adds around one user message of ``text``, or
        around the messages ``(role, content)`` of a chat history (their role headers, one
        per message): the whole counted as the server renders it, less each content's own
        count (vLLM's and the calibration server's ``/tokenize`` take ``messages``); None
        where the server cannot say."""
        turns = (("user", text),) if isinstance(text, str) else tuple(text)
        try:
            out = self._post(
                "/tokenize",
                {
                    "messages": [{"role": role, "content": c} for role, c in turns],
                    "model": self.model,
                    "add_generation_prompt": True,
                },
            )
            tokens = out.get("tokens")
            if not isinstance(tokens, list):
                return None
            extra = len(tokens) - sum(len(self.encode(c)) for _, c in turns)
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            return None
        return extra if extra >= 0 else None

    def decode(self, ids: list[int]) -> str:
        out = self._post("/detokenize", {"tokens": ids, "model": self.model})
        text = out.get("content", out.get("prompt"))
        if not isinstance(text, str):
            raise ValueError("/detokenize answered without text")
        return text

    def available(self) -> bool:
        try:
            ids = self.encode("hello world")
            return bool(ids) and "world" in self.decode(ids)
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            return False


def load_tokenizer(spec: str) -> Tokenizer:
    """``--tokenizer``: a folder or ``tokenizer.json`` (HF), or a ``.gguf`` file."""
    path = Path(spec).expanduser()
    if not path.exists():
        raise UsageError(f"--tokenizer {spec}: no such file or folder")
    if path.suffix == ".gguf":
        return GGUFTokenizer(path)
    return HFTokenizer(path)
