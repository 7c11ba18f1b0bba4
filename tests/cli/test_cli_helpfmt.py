"""The help formatter tidies typer's type labels where typer has the hook, and leaves
typer versions without it alone (the H200 machine's typer has none: the CLI must run)."""

from __future__ import annotations

import pytest
import typer

from crossover.cli import helpfmt


def test_type_labels_are_plain() -> None:
    assert helpfmt.plain_type("<list[str]>...") == "TEXT..."
    assert helpfmt.plain_type("<int>") == "INTEGER"
    assert helpfmt.plain_type("PATH") == "PATH"
    assert helpfmt.plain_type(None) is None


def test_install_without_the_hook_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (typer.core.TyperOption, typer.core.TyperArgument):
        for klass in cls.__mro__:  # wherever typer defines it, wrapped or not
            if "display_type_rich" in vars(klass):
                monkeypatch.delattr(klass, "display_type_rich")
    helpfmt.install()  # must not raise
    assert not hasattr(typer.core.TyperOption, "display_type_rich")


def test_install_is_idempotent() -> None:
    if not hasattr(typer.core.TyperOption, "display_type_rich"):
        pytest.fail("this typer has no display_type_rich: the tidy-up test needs one")
    helpfmt.install()
    first = typer.core.TyperOption.display_type_rich
    helpfmt.install()
    assert typer.core.TyperOption.display_type_rich is first
