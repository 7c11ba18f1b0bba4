"""``crossover calibration-server``: the command is the calibration package's own
(``crossover.calibration.command``, which ``python -m crossover.calibration`` runs too),
registered here."""

from __future__ import annotations

import typer

from crossover.calibration.command import EXAMPLE, calibration_server


def register(app: typer.Typer) -> None:
    app.command("calibration-server", epilog=EXAMPLE)(calibration_server)
