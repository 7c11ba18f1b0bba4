"""Read a Python object repr such as ``ServerArgs(a=1, b='x', c=[1, 2], d=Cfg(e=None))``.

SGLang logs its effective settings as one such line (``server_args=ServerArgs(...)``,
``python/sglang/srt/entrypoints/engine.py``), ~15 KB of nested quotes, lists, dicts and
dataclass reprs. A regex for ``key=`` finds keys inside quoted values too (a model path
``/m/tp_size=2``); this tokenizer splits ``key=value`` at depth 0 instead, and reads the
values as literals. Nothing is evaluated. A line cut short (a log truncated mid-line)
still gives the items before the cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeAlias

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|nan)")
_CALL = re.compile(r"([A-Za-z_][\w.]*)\(")


@dataclass(frozen=True)
class Call:
    """``Name(k=v, ...)``: a dataclass or namedtuple repr; positional items are kept too."""

    name: str
    kwargs: dict[str, PyValue] = field(default_factory=dict)
    args: tuple[PyValue, ...] = ()


@dataclass(frozen=True)
class Raw:
    """Text that is no literal (``<Backend.FULL: 'full'>``, ``torch.bfloat16``), as written."""

    text: str


PyValue: TypeAlias = (
    "bool | int | float | str | list[PyValue] | dict[str, PyValue] | Call | Raw | None"
)


def _skip_string(text: str, i: int) -> int | None:
    """Index just past the quoted string starting at ``text[i]``; None if it never closes."""
    quote = text[i]
    end_mark = quote * 3 if text.startswith(quote * 3, i) else quote
    j = i + len(end_mark)
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text.startswith(end_mark, j):
            return j + len(end_mark)
        j += 1
    return None


def split_top(text: str, sep: str = ",") -> tuple[list[str], bool]:
    """Split ``text`` at ``sep`` outside quotes and brackets. Returns the pieces and whether
    the text was complete (every bracket and quote closed); when it was not, the unfinished
    last piece is left out."""
    pieces: list[str] = []
    stack: list[str] = []
    start = i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            end = _skip_string(text, i)
            if end is None:
                return pieces, False
            i = end
            continue
        if ch in _OPEN and (ch != "<" or text[i + 1 : i + 2].isalpha()):
            stack.append(_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif not stack and ch == sep:
            pieces.append(text[start:i])
            start = i + 1
        i += 1
    if stack:
        return pieces, False
    pieces.append(text[start:])
    return pieces, True


def _unquote(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            width = {"x": 2, "u": 4, "U": 8}.get(nxt)
            if width is not None and re.fullmatch(r"[0-9a-fA-F]+", body[i + 2 : i + 2 + width]):
                out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
                i += 2 + width
                continue
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def literal(raw: str) -> PyValue:
    """One value: None, bools, numbers, strings, lists/tuples, dicts, calls; else ``Raw``."""
    s = raw.strip()
    if s in ("None", "True", "False"):
        return None if s == "None" else s == "True"
    if _NUMBER.fullmatch(s):
        try:
            return int(s)
        except ValueError:
            return float(s)
    if len(s) >= 2 and s[0] in "'\"" and _skip_string(s, 0) == len(s):
        n = 3 if s.startswith(s[0] * 3) and len(s) >= 6 else 1
        return _unquote(s[n:-n])
    if s[:1] in "[(" and s[-1:] == {"[": "]", "(": ")"}[s[0]]:
        items, ok = split_top(s[1:-1])
        return [literal(p) for p in items if p.strip()] if ok else Raw(s)
    if s[:1] == "{" and s[-1:] == "}":
        items, ok = split_top(s[1:-1])
        out: dict[str, PyValue] = {}
        for item in filter(str.strip, items):
            key, colon, value = _partition_top(item, ":")
            if not colon or not ok:
                return Raw(s)
            k = literal(key)
            out[k if isinstance(k, str) else key.strip()] = literal(value)
        return out
    m = _CALL.match(s)
    if m and s.endswith(")"):
        return parse_call(s) or Raw(s)
    return Raw(s)


def _partition_top(text: str, sep: str) -> tuple[str, str, str]:
    """``text.partition(sep)`` at the first ``sep`` outside quotes and brackets."""
    pieces, _ = split_top(text + sep, sep)
    if len(pieces) >= 1 and len(pieces[0]) < len(text):
        head = pieces[0]
        return head, sep, text[len(head) + len(sep) :]
    return text, "", ""


def parse_call(text: str) -> Call | None:
    """``Name(k=v, ...)`` at the start of ``text``; what follows its closing parenthesis is
    ignored, and a call cut short keeps its complete items."""
    m = _CALL.match(text.strip())
    if m is None:
        return None
    body = text.strip()[m.end() :]
    inner = _inner(body)
    if inner is not None:
        pieces, _ = split_top(inner)
    else:  # cut short: keep the items a comma ended
        pieces, complete = split_top(body)
        if complete:
            pieces = pieces[:-1]
    kwargs: dict[str, PyValue] = {}
    args: list[PyValue] = []
    for piece in filter(str.strip, pieces):
        key, eq, value = _partition_top(piece, "=")
        name = key.strip()
        if eq and name.isidentifier():
            kwargs[name] = literal(value)
        else:
            args.append(literal(piece))
    return Call(m.group(1), kwargs, tuple(args))


def _inner(body: str) -> str | None:
    """The text before the ``)`` that closes a call whose ``(`` preceded ``body``."""
    stack: list[str] = [")"]
    i = 0
    while i < len(body):
        ch = body[i]
        if ch in "'\"":
            end = _skip_string(body, i)
            if end is None:
                return None
            i = end
            continue
        if ch in _OPEN and (ch != "<" or body[i + 1 : i + 2].isalpha()):
            stack.append(_OPEN[ch])
        elif ch == stack[-1]:
            stack.pop()
            if not stack:
                return body[:i]
        i += 1
    return None


def find_call(line: str, name: str) -> Call | None:
    """The ``name(...)`` repr in ``line`` (e.g. after ``server_args=``), parsed."""
    at = line.find(name + "(")
    return parse_call(line[at:]) if at >= 0 else None


def get(call: Call, path: str) -> PyValue:
    """``get(args, "cuda_graph_config.decode.max_bs")``: ``None`` where a step is missing."""
    value: PyValue = call
    for step in path.split("."):
        if isinstance(value, Call):
            value = value.kwargs.get(step)
        elif isinstance(value, dict):
            value = value.get(step)
        else:
            return None
    return value


def show(value: PyValue, width: int = 120) -> str:
    """A parsed value written back about as Python writes it (shortened past ``width``)."""
    if isinstance(value, Raw):
        text = value.text
    elif isinstance(value, Call):
        items = [show(a, width) for a in value.args]
        items += [f"{k}={show(v, width)}" for k, v in value.kwargs.items()]
        text = f"{value.name}({', '.join(items)})"
    elif isinstance(value, list):
        text = "[" + ", ".join(show(v, width) for v in value) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k!r}: {show(v, width)}" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
