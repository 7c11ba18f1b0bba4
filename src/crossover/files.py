"""Files written whole or not at all: a sweep file, the client-floor cache, a command's
``--json`` output; an output path checked before any work, a failed write as one line;
a user's YAML read strictly (a key given twice is refused), its mistakes worded one way."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from crossover.errors import UsageError


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``path`` whole or not at all: the bytes (a text as UTF-8) go to a file beside
    it (``NAME.tmp``), renamed over it once written; its folder is made where missing. An
    error or an interrupt on the way (Ctrl-C, a task cancelled) leaves the old file as it
    was and no ``.tmp`` behind, and is raised as it came."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.write_bytes(raw)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def check_output_file(path: Path | None, flag: str, keep: Sequence[Path | None] = ()) -> None:
    """Fail with one line, before any work, where the file ``flag`` names could not be
    written: a folder in its place, a file where a folder of its path should be, or a
    folder that is not writable (the write came after the measuring, as a traceback);
    or where it is one of ``keep``, the command's own inputs and results (``summarize
    sweep.db --json sweep.db`` wrote its JSON over the database, every record lost)."""
    if path is None:
        return
    for kept in keep:
        if kept is not None and kept.exists() and path.resolve() == kept.resolve():
            raise UsageError(f"{flag} {path}: that file is this command's own {kept.name}")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: that is a folder; give a file's path")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable")


def write_output(path: Path, data: bytes | str, flag: str) -> None:
    """Write an output file whole or not at all (``files.write_atomic``: a file beside
    it, then renamed; its folder made where missing); a failure is one line naming
    ``flag``."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write it ({exc.strerror})") from None


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that refuses a key given twice in one mapping (PyYAML keeps the
    last without a word: ``output_tokens: 4`` then ``output_tokens: 5`` ran 5). The error
    is a ``yaml.YAMLError`` whose ``problem`` names the key, at the second one's line."""
    import yaml

    return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass


def read_yaml(path: Path) -> Any:
    """A user's YAML file (a sweep config, the calibration server's config, the advisor's
    ``--calibration``) read as UTF-8 and parsed by ``load_yaml``; what does not parse is
    one line, the same wherever it is read: ``PATH: not valid YAML at line N`` (``: key
    'K' given twice`` where a key is repeated), ``PATH: not UTF-8 text (byte 0xNN at line
    N)``, ``PATH: cannot read it (why)``. The caller checks what the data means."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        byte = exc.object[exc.start]
        raise UsageError(f"{path}: not UTF-8 text (byte {byte:#04x} at line {line})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML{_yaml_where(exc, text)}") from None


def _yaml_where(exc: Any, text: str) -> str:
    """`` at line N``, and ``: key 'K' given twice`` for a repeated key (PyYAML's other
    problems name its parser's states, not the user's mistake)."""
    import yaml

    line: int | None = None
    if isinstance(exc, yaml.reader.ReaderError):  # a control character: no mark, a position
        line = text[: exc.position].count("\n") + 1
    elif (mark := getattr(exc, "problem_mark", None)) is not None:
        line = mark.line + 1
    where = f" at line {line}" if line is not None else ""
    problem = getattr(exc, "problem", None) or ""
    return where + (f": {problem}" if problem.endswith("given twice") else "")


@cache
def _strict_loader() -> type[Any]:
    import yaml

    merge = "tag:yaml.org,2002:merge"

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == merge:
                        continue  # a merge (<<) may be overridden: that is its purpose
                    key = self.construct_object(key_node)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} given twice", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader
