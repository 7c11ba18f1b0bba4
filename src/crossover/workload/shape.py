"""The shape of a workload: per-request input and output lengths drawn from a distribution,
and prompts that share a prefix.

Lengths are drawn per request index from a seeded generator of their own
(``random.Random("crossover-len:SEED:STREAM:I")``), so request ``i`` gets the same input and
output length on every engine and at every level, whatever else is drawn: the work stays
matched. Each request is still forced to its own exact output length and verified against it
(``RequestRecord.expected_output_tokens``).

Distributions (the compact form is what ``--input-lengths`` / ``--output-lengths`` and the
sweep YAML take; a mapping with the same fields works in YAML too):

* ``256``: fixed;
* ``uniform:64-512``: uniform integers in [64, 512];
* ``normal:512,128`` or ``normal:512,128,16-2048``: mean, standard deviation, optional bounds
  (draws outside the bounds are clipped to them; the default lower bound is 1);
* ``lognormal:512,256[,MIN-MAX]``: a lognormal with that mean and standard deviation (of the
  lengths themselves, not of their logarithm), the long-tailed shape of chat traffic;
* ``empirical:PATH``: lengths drawn with replacement from a file (one integer per line, or a
  JSON list of integers);
* ``dataset:MAX`` (output lengths, with a prompt file): each request's own reply in the
  file (a ShareGPT conversation's first assistant turn after its prompt), counted with the
  tokenizer and capped at MAX; every engine gets the same prompts, so the same lengths.

A shared prefix (``--shared-prefix 4x2048`` or ``4x2048:random``): P distinct prefixes of L
tokens; request ``i`` starts with prefix ``i mod P`` (``round_robin``, the default) or a seeded
random one (``random``), then its own text. The input length is then the unique part: the
prompt is L + that many tokens.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError, model_validator

DistKind = Literal["fixed", "uniform", "normal", "lognormal", "empirical", "dataset"]


class LengthDist(BaseModel):
    """A distribution of token counts (see the module's docstring)."""

    model_config = {"extra": "forbid", "frozen": True}

    dist: DistKind
    value: int | None = Field(None, ge=1, description="fixed: the length")
    min: int | None = Field(None, ge=1, description="lower bound (clipped to)")
    max: int | None = Field(None, ge=1, description="upper bound (clipped to)")
    mean: float | None = Field(None, gt=0)
    sd: float | None = Field(None, ge=0)
    file: Path | None = None
    #: the empirical file's lengths, read once when the spec is validated
    values: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        need: dict[str, tuple[str, ...]] = {
            "fixed": ("value",),
            "uniform": ("min", "max"),
            "normal": ("mean", "sd"),
            "lognormal": ("mean", "sd"),
            "empirical": ("file",),
            "dataset": ("max",),
        }
        missing = [f for f in need[self.dist] if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a {self.dist} length needs {', '.join(missing)}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"length bounds {self.min}-{self.max}: min is above max")
        if self.dist == "empirical" and not self.values:
            assert self.file is not None
            object.__setattr__(self, "values", _read_lengths(self.file))
        return self

    def spec(self) -> str:
        """The compact form (what the database records and a resume compares)."""
        b = f",{self.min or 1}-{self.max}" if self.max is not None else ""
        if self.dist == "fixed":
            return str(self.value)
        if self.dist == "uniform":
            return f"uniform:{self.min}-{self.max}"
        if self.dist in ("normal", "lognormal"):
            return f"{self.dist}:{_num(self.mean)},{_num(self.sd)}{b}"
        if self.dist == "dataset":
            return f"dataset:{self.max}"
        return f"empirical:{self.file}"

    def nominal(self) -> int:
        """One length that stands for the distribution in a one-number summary: the fixed
        value, else the mean (of the file's values for ``empirical``), rounded; for
        ``dataset`` its cap (the replies are counted only with the prompts)."""
        if self.dist == "fixed":
            assert self.value is not None
            return self.value
        if self.dist == "dataset":
            assert self.max is not None
            return self.max
        if self.dist == "uniform":
            assert self.min is not None
            assert self.max is not None
            return round((self.min + self.max) / 2)
        if self.dist == "empirical":
            return max(1, round(sum(self.values) / len(self.values)))
        assert self.mean is not None
        return max(1, round(self.mean))

    def draw(self, seed: int, stream: str, index: int) -> int:
        """The length of request ``index`` (same for every engine and level)."""
        if self.dist == "dataset":
            raise ValueError("dataset lengths come with the prompt file's replies, not drawn")
        if self.dist == "fixed":
            assert self.value is not None
            return self.value
        rng = random.Random(f"crossover-len:{seed}:{stream}:{index}")
        if self.dist == "uniform":
            assert self.min is not None
            assert self.max is not None
            return rng.randint(self.min, self.max)
        if self.dist == "empirical":
            x = float(rng.choice(self.values))
        elif self.dist == "normal":
            assert self.mean is not None
            assert self.sd is not None
            x = rng.gauss(self.mean, self.sd)
        else:
            assert self.mean is not None
            assert self.sd is not None
            sigma2 = math.log(1.0 + (self.sd / self.mean) ** 2)
            x = rng.lognormvariate(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2))
        lo, hi = self.min or 1, self.max
        n = max(lo, round(x))
        return min(n, hi) if hi is not None else n


def _num(x: float | None) -> str:
    assert x is not None
    return str(int(x)) if float(x).is_integer() else str(x)


def _read_lengths(path: Path) -> tuple[int, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read lengths file {path}: {exc.strerror}") from None
    try:
        raw: Any = json.loads(text) if text.lstrip().startswith("[") else text.split()
        values = tuple(int(v) for v in raw)
    except (ValueError, TypeError):
        raise ValueError(
            f"{path}: expected one integer per line or a JSON list of integers"
        ) from None
    if not values or min(values) < 1:
        raise ValueError(f"{path}: needs at least one length, every one at least 1")
    return values


def _bounds(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    if not sep:
        raise ValueError(f"expected MIN-MAX, got {text!r}")
    return int(lo), int(hi)


def parse_length(text: str | int | dict[str, Any] | LengthDist) -> LengthDist:
    """A ``LengthDist`` from its compact form, a YAML mapping, or an integer; a mistake is a
    ``ValueError`` naming the forms."""
    if isinstance(text, LengthDist):
        return text
    if isinstance(text, bool):
        raise ValueError("a length is a number or a distribution, not true/false")
    if isinstance(text, int):
        return LengthDist(dist="fixed", value=text)
    if isinstance(text, dict):
        return LengthDist.model_validate(text)
    s = str(text).strip()
    kind, sep, rest = s.partition(":")
    try:
        if s == "dataset":
            raise ValueError("the dataset's reply lengths need a cap: dataset:MAX")
        if not sep:
            return LengthDist(dist="fixed", value=int(s))
        if kind == "uniform":
            lo, hi = _bounds(rest)
            return LengthDist(dist="uniform", min=lo, max=hi)
        if kind in ("normal", "lognormal"):
            parts = rest.split(",")
            if len(parts) not in (2, 3):
                raise ValueError("expected MEAN,SD[,MIN-MAX]")
            lo_hi = _bounds(parts[2]) if len(parts) == 3 else (None, None)
            return LengthDist(
                dist=kind,
                mean=float(parts[0]),
                sd=float(parts[1]),
                min=lo_hi[0],
                max=lo_hi[1],
            )
        if kind == "empirical":
            return LengthDist(dist="empirical", file=Path(rest))
        if kind == "dataset":
            return LengthDist(dist="dataset", max=int(rest))
    except ValueError as exc:
        raise ValueError(f"length {s!r}: {_first_line(exc)}") from None
    raise ValueError(
        f"length {s!r}: use N, uniform:MIN-MAX, normal:MEAN,SD[,MIN-MAX], "
        "lognormal:MEAN,SD[,MIN-MAX], empirical:PATH or dataset:MAX (with a prompt file)"
    )


def _first_line(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        field = ".".join(str(x) for x in err["loc"])
        return f"{field}: {msg}" if field else msg
    return str(exc).splitlines()[0] if str(exc) else "invalid"


class SharedPrefix(BaseModel):
    """P prefixes of L tokens shared by the requests (see the module's docstring)."""

    model_config = {"extra": "forbid", "frozen": True}

    prefixes: int = Field(..., ge=1, le=100_000)
    tokens: int = Field(..., ge=1, le=10_000_000)
    pattern: Literal["round_robin", "random"] = "round_robin"

    def spec(self) -> str:
        tail = "" if self.pattern == "round_robin" else f":{self.pattern}"
        return f"{self.prefixes}x{self.tokens}{tail}"

    def prefix_of(self, seed: int, index: int) -> int:
        if self.pattern == "round_robin":
            return index % self.prefixes
        return random.Random(f"crossover-prefix:{seed}:{index}").randrange(self.prefixes)


def parse_shared_prefix(value: str | dict[str, Any] | SharedPrefix) -> SharedPrefix:
    """``PxL`` or ``PxL:random`` (or a mapping with prefixes, tokens, pattern)."""
    if isinstance(value, SharedPrefix):
        return value
    if isinstance(value, dict):
        return SharedPrefix.model_validate(value)
    s = str(value).strip()
    head, _, pattern = s.partition(":")
    p, sep, n = head.partition("x")
    try:
        if not sep:
            raise ValueError
        return SharedPrefix(
            prefixes=int(p),
            tokens=int(n),
            pattern=(pattern or "round_robin"),
        )
    except ValueError:
        raise ValueError(
            f"shared prefix {s!r}: use PREFIXESxTOKENS, e.g. 4x2048, optionally "
            ":round_robin or :random"
        ) from None


class _Spec(Protocol):
    def spec(self) -> str: ...


def shape_specs(**parts: _Spec | None) -> dict[str, str]:
    """The given shape parts in compact form, those that are set (what a run, a sweep and a
    capacity search record as their workload's shape)."""
    return {name: part.spec() for name, part in parts.items() if part is not None}


def trace_specs(
    trace: object | None, block_tokens: int, speed: float | None = None
) -> dict[str, str]:
    """A replayed trace's part of the shape ({} without one): its file (and the speed a
    run replays it at) and its block size."""
    if trace is None:
        return {}
    name = f"{trace} x{speed:g}" if speed is not None else str(trace)
    return {"trace": name, "trace_block_tokens": str(block_tokens)}
