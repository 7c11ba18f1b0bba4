"""The calibration server dressed as llama-server, for sweeps that launch an engine.

Takes llama-server's flags (-m, --host, --port, -np, -c, ...; ``--version`` answers like
llama-server) and serves the calibration server with the settings in the JSON file named
by CALIB_ENGINE_CONFIG. CALIB_ENGINE_DIE_AFTER=N makes it kill itself (SIGKILL, as the
OOM killer would) when generation request number N arrives; with CALIB_ENGINE_DIE_ONCE=PATH
it does so only while PATH does not exist (it creates it), so the restarted engine lives.
CALIB_ENGINE_FAIL_GPUS=G makes it exit at once (status 1) when CUDA_VISIBLE_DEVICES is G:
one replica of several that will not start. CALIB_ENGINE_DIE_GPUS=G limits
CALIB_ENGINE_DIE_AFTER to the replica whose CUDA_VISIBLE_DEVICES is G.
CALIB_ENGINE_LOAD_S=S makes it take S seconds before it listens (a model loading).
CALIB_ENGINE_STARTS=PATH appends a line to PATH each time it starts (its process id): the
engine's starts counted from its side. CALIB_ENGINE_VERSION_FILE=PATH: ``--version``
says the version PATH holds (an engine upgraded between two sessions), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-m", dest="model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("-np", type=int, default=1)
    parser.add_argument("--version", action="store_true")
    args, _rest = parser.parse_known_args()
    if args.version:
        stamp = os.environ.get("CALIB_ENGINE_VERSION_FILE")
        version = Path(stamp).read_text().strip() if stamp else "1"
        sys.stderr.write(f"version: {version} (calibration engine)\n")
        return 0

    fail_gpus = os.environ.get("CALIB_ENGINE_FAIL_GPUS")
    if fail_gpus is not None and os.environ.get("CUDA_VISIBLE_DEVICES") == fail_gpus:
        sys.stderr.write(f"E calibration engine: no GPU {fail_gpus} (on purpose)\n")
        return 1

    starts = os.environ.get("CALIB_ENGINE_STARTS")
    if starts:
        with Path(starts).open("a") as fh:
            fh.write(f"{os.getpid()}\n")

    load_s = float(os.environ.get("CALIB_ENGINE_LOAD_S", "0"))
    if load_s > 0:
        time.sleep(load_s)

    from aiohttp import web

    from crossover.calibration.server import build_app, build_config

    settings = json.loads(Path(os.environ["CALIB_ENGINE_CONFIG"]).read_text())
    die_after = int(os.environ.get("CALIB_ENGINE_DIE_AFTER", "0"))
    die_gpus = os.environ.get("CALIB_ENGINE_DIE_GPUS")
    if die_gpus is not None and os.environ.get("CUDA_VISIBLE_DEVICES") != die_gpus:
        die_after = 0
    once = os.environ.get("CALIB_ENGINE_DIE_ONCE")
    if once and Path(once).exists():
        die_after = 0
    seen = 0

    @web.middleware
    async def dying(request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        nonlocal seen
        if request.path.startswith("/v1/") and request.method == "POST":
            seen += 1
            if die_after and seen >= die_after:
                if once:
                    Path(once).touch()  # noqa: ASYNC240 (it is about to die)
                sys.stderr.write("E calibration engine: killed on purpose\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        return await handler(request)

    app = build_app(build_config(settings))
    app.middlewares.append(dying)
    sys.stderr.write(f"I srv  load_model: initializing, n_slots = {args.np}\n")
    sys.stderr.flush()
    web.run_app(
        app, host=args.host, port=args.port, access_log=None, print=None, shutdown_timeout=0.1
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
