"""SGLang's long garbage collections: logged by default (``--gc-warning-threshold-secs``,
``gc_warning_s``), gathered from its log into one finding, and its ``/freeze_gc`` asked
for over real HTTP (a stand-in server that counts the POSTs)."""

from __future__ import annotations

import gzip
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crossover.engines import EngineConfig
from crossover.engines.adapters import launch_spec
from crossover.engines.effective import effective_settings, log_warnings
from crossover.engines.gcfreeze import freeze_gc
from crossover.engines.logpatterns import WarningRule
from crossover.errors import UsageError

RESULTS = Path(__file__).parents[2] / "docs" / "results" / "h100"
GC_LOG = RESULTS / "sglang-gc" / "engines" / "sglang.log.gz"
OPEN_LOG = RESULTS / "moe-open" / "engines" / "sglang.log.gz"
FROZEN_LOG = RESULTS / "moe-open-decide-freeze" / "engines" / "sglang.log.gz"
FLAG = "--gc-warning-threshold-secs"


def _line(stamp: str, gen: int, seconds: float, gen2: int) -> str:
    return (
        f"[2026-12-06 {stamp}] LONG GARBAGE COLLECTION DETECTED | Generation {gen} | "
        f"Duration: {seconds:.4f}s | # Objects: gen0=3, gen1=0, gen2={gen2} | This may cause "
        "latency jitter. Consider calling the freeze_gc API after sending a few warmup requests."
    )


def _gc(lines: list[str]) -> list[str]:
    return [w.message for w in log_warnings("sglang", lines) if w.key == "long_gc"]


def test_the_committed_closed_loop_log_gives_one_finding() -> None:
    text = gzip.decompress(GC_LOG.read_bytes()).decode("utf-8", errors="replace")
    (w,) = [w for w in effective_settings(text, "sglang").warnings if w.key == "long_gc"]
    assert w.level == "warning" and w.count == 6 and w.line == 50
    assert w.message.startswith(
        "6 garbage collections of 0.50-0.61 s (generation 2 of up to 1,099,422 objects) in "
        "SGLang's front end (its tokenizer manager"
    )
    assert "freeze_gc: true" in w.message
    assert w.evidence is not None and "Duration: 0.6088s" in w.evidence


def test_the_committed_open_loop_log_gives_its_own_range() -> None:
    text = gzip.decompress(OPEN_LOG.read_bytes()).decode("utf-8", errors="replace")
    (message,) = _gc(text.splitlines())
    assert message.startswith("6 garbage collections of 0.55-0.74 s (generation 2 of up to ")


def _freeze(stamp: str, status: str = "200 OK") -> str:
    """uvicorn's access line for crossover's POST to /freeze_gc (seen, SGLang 0.5.17)."""
    return f'[2026-12-07 {stamp}] INFO:     127.0.0.1:36720 - "POST /freeze_gc HTTP/1.1" {status}'


def test_the_unfrozen_finding_names_the_remedy_as_measured() -> None:
    """The remedy's own measurement is said as it went: none after it at c = 64 and 256
    or at 8-12 requests/s, two small ones at 20 (docs/results/h100/moe-open-decide-freeze)."""
    (message,) = _gc([_line("11:00:01", 2, 0.6088, 1008389)])
    assert "freeze_gc: true (SGLang's own remedy, its /freeze_gc, before each level)" in message
    assert message.endswith(
        "(measured on an H100: none of 0.05 s or more logged after it at c = 64 and 256 or "
        "at 8-12 requests/s, two of 0.05-0.06 s at 20 requests/s)"
    )
    assert "no collection of 0.05 s or more after it" not in message


def test_collections_after_a_freeze_say_so_and_name_no_remedy() -> None:
    """A freeze answered before the first collection: the collector was frozen, so the
    finding says what such collections are and does not recommend freeze_gc."""
    lines = [
        _freeze("10:03:02"),
        _line("10:05:10", 2, 0.0538, 70571),
        _freeze("10:05:12"),
        _line("10:05:15", 2, 0.0566, 68424),
    ]
    (w,) = [w for w in log_warnings("sglang", lines) if w.key == "long_gc"]
    assert w.count == 2 and w.line == 2
    assert w.message == (
        "2 garbage collections of 0.05-0.06 s (generation 2 of up to 70,571 objects) in "
        "SGLang's front end (its tokenizer manager, one Python process) with its collector "
        "frozen (a POST /freeze_gc answered before them): a freeze leaves out only the "
        "objects alive at it, so those made since the last one are still collected; every "
        "request in flight waits that long (unfrozen, SGLang's took 0.42-0.74 s, measured "
        "on an H100)"
    )
    assert "freeze_gc: true" not in w.message and "remedy" not in w.message


def test_a_refused_freeze_keeps_the_remedy() -> None:
    # refused: nothing was frozen
    (message,) = _gc([_freeze("10:03:02", "404 Not Found"), _line("10:05:10", 2, 0.5, 1000000)])
    assert "freeze_gc: true (SGLang's own remedy" in message
    assert "collector frozen" not in message


def test_a_collection_before_the_first_freeze_is_said_apart_and_names_no_remedy() -> None:
    """SGLang collects once at its start or warm-up, before the sweep's first freeze (the
    committed frozen decision's first two logs: 0.65 and 0.58 s, then none): the freeze is
    on, so no remedy is named; the collections after it are the frozen ones, those before
    it said apart."""
    lines = [_line("10:05:10", 2, 0.5, 1000000), _freeze("10:05:12"), _line("10:05:15", 2, 0.06, 9)]
    (w,) = [w for w in log_warnings("sglang", lines) if w.key == "long_gc"]
    assert w.count == 1 and w.line == 3
    assert w.message.startswith("1 garbage collection of 0.06 s (generation 2 of up to 9 ")
    assert "with its collector frozen" in w.message
    assert w.message.endswith(
        "; before its first freeze, 1 more of 0.50 s (generation 2 of up to 1,000,000 "
        "objects) (at its start or warm-up)"
    )
    assert "remedy" not in w.message and "freeze_gc: true" not in w.message
    # none after the freeze: the one before it, said as such
    (w,) = [w for w in log_warnings("sglang", lines[:2]) if w.key == "long_gc"]
    assert w.count == 1 and w.line == 1
    assert w.message.endswith(
        " before its collector was first frozen (the first POST /freeze_gc was answered "
        "later: at its start or warm-up); none of 0.05 s or more came after it"
    )
    assert "remedy" not in w.message


@pytest.mark.parametrize(
    ("name", "first"),
    [("sglang.20261206T204823.log.gz", "0.65 s"), ("sglang.20261207T010145.log.gz", "0.58 s")],
)
def test_the_committed_frozen_logs_with_a_collection_at_the_start(name: str, first: str) -> None:
    """The decision's first two SGLang starts each logged one collection before the first
    freeze (line 50; the freeze at 81-83), none after."""
    text = gzip.decompress((FROZEN_LOG.parent / name).read_bytes()).decode("utf-8", "replace")
    (w,) = [w for w in effective_settings(text, "sglang").warnings if w.key == "long_gc"]
    assert w.count == 1 and w.line == 50
    assert w.message.startswith(f"1 garbage collection of {first} ")
    assert "before its collector was first frozen" in w.message
    assert "remedy" not in w.message


def test_the_committed_frozen_log_says_its_collector_was_frozen() -> None:
    """docs/results/h100/moe-open-decide-freeze: SGLang launched with freeze_gc: true, its
    /freeze_gc answered 200 at lines 85, 1403 and 2949, then two collections of 0.05-0.06 s
    at lines 4090 and 4257."""
    text = gzip.decompress(FROZEN_LOG.read_bytes()).decode("utf-8", errors="replace")
    (w,) = [w for w in effective_settings(text, "sglang").warnings if w.key == "long_gc"]
    assert w.count == 2 and w.line == 4090
    assert w.message.startswith(
        "2 garbage collections of 0.05-0.06 s (generation 2 of up to 70,571 objects) in "
        "SGLang's front end (its tokenizer manager, one Python process) with its collector "
        "frozen (a POST /freeze_gc answered before them): "
    )
    assert "freeze_gc: true" not in w.message


def test_a_context_needs_its_message() -> None:
    match = "context, context_message, context_before and context_none_after go together"
    with pytest.raises(ValueError, match=match):
        WarningRule("k", "note", re.compile("x"), "m", "o", context=re.compile("y"))
    with pytest.raises(ValueError, match=match):
        WarningRule(
            "k", "note", re.compile("x"), "m", "o", context=re.compile("y"),
            context_message="a", context_before="b",
        )  # fmt: skip


def test_one_collection_is_one_duration_and_singular() -> None:
    (message,) = _gc(["[2026-12-06 11:00:00] ready", _line("11:00:01", 2, 0.6088, 1008389)])
    assert message.startswith("1 garbage collection of 0.61 s (generation 2 of up to 1,008,389")


def test_collections_of_several_generations_are_named() -> None:
    lines = [_line("11:00:01", 1, 0.08, 900), _line("11:00:02", 2, 0.3, 1000)]
    (message,) = _gc(lines)
    assert message.startswith(
        "2 garbage collections of 0.08-0.30 s (generations 1, 2, generation 2 of up to 1,000"
    )


def test_a_log_without_long_collections_has_no_finding() -> None:
    assert _gc(["[2026-12-06 11:00:00] The server is fired up and ready to roll!"]) == []


def _argv(**knobs: object) -> list[str]:
    config = EngineConfig(engine="sglang", model="Qwen/Qwen3-30B-A3B", **knobs)  # type: ignore[arg-type]
    return launch_spec(config, 8000, Path("/tmp")).argv


def test_the_long_collections_are_logged_by_default() -> None:
    argv = _argv()
    assert argv[argv.index(FLAG) + 1] == "0.05"


@pytest.mark.parametrize(
    ("knobs", "given"),
    [
        ({"gc_warning_s": 0.2}, [FLAG, "0.2"]),
        ({"gc_warning_s": 0}, []),  # SGLang's own default: off, no flag at all
        ({"extra_args": [f"{FLAG}=1"]}, [f"{FLAG}=1"]),
        ({"extra_args": [FLAG, "0"], "gc_warning_s": 0.3}, [FLAG, "0"]),  # the user's wins
    ],
)
def test_the_knob_and_the_users_own_flag(knobs: dict[str, object], given: list[str]) -> None:
    argv = _argv(**knobs)
    at = [i for i, a in enumerate(argv) if a.startswith(FLAG)]
    assert len(at) == len(given[:1])  # never given twice
    assert argv[at[0] : at[0] + len(given)] == given if given else at == []


@pytest.mark.parametrize("engine", ["vllm", "llamacpp", "trtllm"])
def test_other_engines_refuse_the_knob(engine: str) -> None:
    config = EngineConfig(engine=engine, model="m.gguf", gc_warning_s=0.05)
    with pytest.raises(UsageError, match=r"does not take gc_warning_s=0\.05: SGLang only"):
        launch_spec(config, 8000, Path("/tmp"))


class _Server:
    """A stand-in for SGLang's HTTP front end: counts the POSTs to /freeze_gc and answers
    ``status`` (with ``body`` where it is not 200)."""

    def __init__(self, status: int, body: bytes = b'{"detail":"Not Found"}') -> None:
        self.posts = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path == "/freeze_gc":
                    server.posts += 1
                    code, said = status, (b"" if status == 200 else body)
                else:
                    code, said = 404, b""
                self.send_response(code)
                self.send_header("Content-Length", str(len(said)))
                self.end_headers()
                self.wfile.write(said)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def sglang_front() -> Iterator[_Server]:
    server = _Server(200)
    yield server
    server.close()


def test_freeze_posts_once_and_takes_the_200(sglang_front: _Server) -> None:
    assert freeze_gc(sglang_front.url, "/freeze_gc") is None
    assert sglang_front.posts == 1


def test_a_refusal_is_a_few_words_not_an_exception() -> None:
    server = _Server(404)
    try:
        why = freeze_gc(server.url, "/freeze_gc")
    finally:
        server.close()
    assert server.posts == 1
    assert why == 'status 404: {"detail":"Not Found"}'


def test_the_servers_words_are_one_printable_line() -> None:
    server = _Server(500, b"boom\n\x1b[31mred\x1b[0m\tend")
    try:
        why = freeze_gc(server.url, "/freeze_gc")
    finally:
        server.close()
    assert why == "status 500: boom ?[31mred?[0m end"


def test_no_server_is_a_few_words_too() -> None:
    server = _Server(200)
    url = server.url
    server.close()
    why = freeze_gc(url, "/freeze_gc", timeout_s=2)
    assert why is not None and why.startswith("no answer (")
