"""A small real stand-in for llama-server, for lifecycle tests.

Takes llama-server's flags (-m, --host, --port, -np, -c, ...), writes llama-server-like
startup lines, and serves /health, /props and /metrics. FAKE_ENGINE_MODE picks a failure:
``ok`` (default), ``crash_at_start``, ``crash_after=S``, ``slow=S`` (503 on /health for
S seconds), ``never_healthy``, ``no_props`` (no /props: version from --version),
``ignore_term`` (SIGTERM ignored), ``spawn_child`` (a grandchild in the same group),
``multicast=S`` (S seconds after start, logs the line vLLM 0.26 printed when it chose the
FlashInfer ``mnnvl`` all-reduce, i.e. NVLink multicast).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(line: str) -> None:
    sys.stderr.write(f"0.00.000.000 I srv  {line}\n")
    sys.stderr.flush()


def main() -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-m", dest="model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("-np", type=int, default=1)
    parser.add_argument("-c", type=int, default=4096)
    parser.add_argument("--version", action="store_true")
    args, _rest = parser.parse_known_args()
    if args.version:
        sys.stderr.write("version: 9999 (build 9999, commit fake0001)\nbuilt with cc for x86_64\n")
        return 0

    mode = os.environ.get("FAKE_ENGINE_MODE", "ok")
    name, _, arg = mode.partition("=")
    log("llama_server: initializing ...")
    log(f"load_model: loading model '{args.model}'")
    if name == "crash_at_start":
        for i in range(30):
            log(f"load_model: noise line {i}")
        sys.stderr.write("E llama_model_load: error loading model: tensor 'x' not found\n")
        sys.stderr.write("E srv    load_model: failed to load model\n")
        return 1
    if name == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if name == "spawn_child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        log(f"spawned child pid {child.pid}")

    ready_at = time.monotonic() + (float(arg) if name == "slow" else 0.0)
    graphs = "off" if "GGML_CUDA_DISABLE_GRAPHS" in os.environ else "default"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            healthy = name != "never_healthy" and time.monotonic() >= ready_at
            if self.path == "/health":
                code, body = (200, b'{"status":"ok"}') if healthy else (503, b'{"error":"loading"}')
            elif self.path == "/props" and name != "no_props":
                build = b"b0-unknown" if name == "unknown_build" else b"b9999-fake0001"
                code, body = 200, b'{"build_info":"%s","total_slots":%d}' % (build, args.np)
            elif self.path == "/metrics":
                code, body = 200, b"llamacpp:requests_processing 0\n"
            else:
                code, body = 404, b"{}"
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    log(
        f"load_model: initializing, n_slots = {args.np}, n_ctx_slot = {args.c // args.np}, "
        "kv_unified = 'false'"
    )
    log(f"fake: cuda graphs {graphs}")
    log("llama_server: model loaded")
    log(f"llama_server: listening on http://{args.host}:{args.port}")
    if name == "multicast":

        def _multicast() -> None:
            time.sleep(float(arg or 0))
            sys.stderr.write(
                "(Worker_TP0 pid=1819) INFO 11-30 19:50:19 [flashinfer_all_reduce.py:121] "
                "Auto-selected flashinfer allreduce backend: mnnvl\n"
            )
            sys.stderr.flush()

        threading.Thread(target=_multicast, daemon=True).start()
    if name == "crash_after":

        def _crash() -> None:
            time.sleep(float(arg))
            sys.stderr.write("E fake: segmentation fault (simulated)\n")
            sys.stderr.flush()
            os._exit(3)

        threading.Thread(target=_crash, daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
