"""vLLM in Triton's Python backend, through its async engine (decoupled streaming).

Written into a model repository by ``crossover plan --engine triton --hosted vllm``; runs
inside the stub. config.pbtxt's ``engine_args`` parameter is a JSON object of
``vllm.AsyncEngineArgs`` fields (model, tensor_parallel_size, max_num_seqs, ...); its
``engine`` parameter is the name crossover's engine spec gives vLLM (the settings line's).

The engine runs on an asyncio loop in a thread of its own; ``execute`` hands each request
to that loop and returns at once (decoupled), so requests reach vLLM's continuous batching
concurrently and one instance is enough. Each request streams one response per engine
step (the text since the last one, with the cumulative token count); ``max_tokens``,
``min_tokens``, ``ignore_eos`` and ``temperature`` map to ``vllm.SamplingParams``.

The engine is asked for what ``vllm serve`` asks it for: only the new tokens of each step
for a streamed request (``RequestOutputKind.DELTA``), only the final output otherwise
(``FINAL_ONLY``), so a comparison with ``vllm serve`` measures Triton's path, not a
costlier request to the engine. A vLLM without ``RequestOutputKind`` gets its default
(the whole output so far at every step), read as such.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from typing import Any

import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crossover_triton_common as common


def make_engine(engine_args: dict[str, Any]) -> Any:
    """The vLLM async engine (the seam a test replaces)."""
    try:
        from vllm import AsyncEngineArgs, AsyncLLMEngine
    except ImportError:
        # vLLM's top level imports these lazily, and an AttributeError raised inside that
        # import reads as "cannot import name AsyncEngineArgs" (seen on the
        # H200 with the stub's NumPy): import the modules themselves, so the log shows
        # the real cause (the paths of vLLM 0.26.0's own lazy table)
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.engine.async_llm_engine import AsyncLLMEngine

    return AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**engine_args))


def engine_version() -> str | None:
    """vLLM's version; None where it is not installed (under the seam's fake engine)."""
    try:
        from vllm import __version__
    except ImportError:
        return None
    return str(__version__)


def sampling_params(g: common.Generate) -> tuple[Any, bool]:
    """vLLM's sampling parameters for the request, and whether its outputs come as
    increments (True: each output holds only what is new) or whole (False: vLLM's
    default, each output holds everything so far)."""
    try:
        from vllm import SamplingParams
    except ImportError:  # as make_engine: the real cause
        from vllm.sampling_params import SamplingParams

    fields: dict[str, Any] = {
        "max_tokens": g.max_tokens,
        "min_tokens": g.min_tokens,
        "ignore_eos": g.ignore_eos,
    }
    if g.temperature is not None:
        fields["temperature"] = g.temperature
    try:
        from vllm.sampling_params import RequestOutputKind
    except ImportError:
        return SamplingParams(**fields), False
    # as vllm serve asks: increments for a stream, the final output alone otherwise
    kind = RequestOutputKind.DELTA if g.stream else RequestOutputKind.FINAL_ONLY
    return SamplingParams(**fields, output_kind=kind), True


class TritonPythonModel:
    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        params = common.parameters(config)
        engine_args = json.loads(params["engine_args"])
        self.default_max_tokens = int(params.get("default_max_tokens", "128"))
        instance = args.get("model_instance_name", args.get("model_name", "model"))
        self.counter = common.TokenCounter(pb_utils, args["model_name"], instance)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="vllm-loop", daemon=True)
        self._thread.start()
        self.engine = self._call(self._start(engine_args))
        # the name crossover's spec gives this engine (config.pbtxt), its version under it
        engine = params["engine"]
        settings = {**engine_args, engine: engine_version()}
        print(common.settings_line(engine, instance, settings, config), flush=True)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _start(self, engine_args: dict[str, Any]) -> Any:
        return make_engine(engine_args)  # built on the loop: its background tasks live there

    async def _generate(self, request: Any) -> None:
        sender = request.get_response_sender()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            g = common.read_request(pb_utils, request, self.default_max_tokens)
        except (ValueError, TypeError) as exc:
            sender.send(common.error_response(pb_utils, str(exc)), flags=final)
            return
        n_out = n_in = 0
        sent = ""
        text = ""
        try:
            params, increments = sampling_params(g)
            stream = self.engine.generate(g.prompt, params, uuid.uuid4().hex)
            async for output in stream:
                completion = output.outputs[0]
                if increments:
                    n_out += len(completion.token_ids)
                    text += completion.text
                else:
                    n_out = len(completion.token_ids)
                    text = completion.text
                n_in = max(n_in, len(output.prompt_token_ids or ()))
                if g.stream and not output.finished:
                    sender.send(common.response(pb_utils, text[len(sent) :], g, n_out, n_in))
                    sent = text
        except Exception as exc:  # the client hears why
            self.counter.add(n_out)
            sender.send(common.error_response(pb_utils, f"vLLM: {exc}"), flags=final)
            return
        self.counter.add(n_out)
        last = text[len(sent) :] if g.stream else text
        sender.send(common.response(pb_utils, last, g, n_out, n_in), flags=final)

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            asyncio.run_coroutine_threadsafe(self._generate(request), self.loop)
        return None

    def finalize(self) -> None:
        engine = getattr(self, "engine", None)
        shutdown = getattr(engine, "shutdown", None)
        if callable(shutdown):
            shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
