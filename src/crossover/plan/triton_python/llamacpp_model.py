"""llama.cpp in Triton's Python backend, through llama-cpp-python (decoupled streaming).

Written into a model repository by ``crossover plan --engine triton --hosted llamacpp``;
runs inside the stub. Settings come from config.pbtxt's ``parameters``: ``model_path``
(the GGUF), ``n_ctx``, ``n_batch``, ``n_threads`` (0: every CPU the process may use),
``n_gpu_layers``, ``seed``, ``default_max_tokens``, and where the library and bindings are
(``llama_cpp_lib_path``: the folder of ``libllama.so``, set as ``LLAMA_CPP_LIB_PATH``;
``llama_cpp_python_dir``: the folder holding ``llama_cpp/``), and ``engine``: the name
crossover's engine spec gives llama.cpp (the settings line's).

One ``Llama`` per model instance (a stub process each); a ``Llama`` decodes one sequence
at a time, so each instance serves its requests one after another (``execute`` returns
when a request's last token is sent) and Triton queues the rest: concurrency comes from
``instance_group.count``, each instance holding its own copy of the model and KV cache.
``min_tokens`` (and ``ignore_eos``) hold the end-of-generation tokens back with a logits
processor until that many tokens are out.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crossover_triton_common as common


class TritonPythonModel:
    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        params = common.parameters(config)
        if params.get("llama_cpp_lib_path"):
            os.environ["LLAMA_CPP_LIB_PATH"] = params["llama_cpp_lib_path"]
        bindings = params.get("llama_cpp_python_dir")
        if bindings and bindings not in sys.path:
            sys.path.append(bindings)
        import llama_cpp

        self._llama_cpp = llama_cpp
        # 0: every CPU this process may use (llama-server's default is the physical cores:
        # the same count where there is no SMT)
        threads = int(params.get("n_threads", "0") or 0) or len(os.sched_getaffinity(0))
        settings: dict[str, Any] = {
            "model_path": params["model_path"],
            "n_ctx": int(params.get("n_ctx", "4096")),
            "n_batch": int(params.get("n_batch", "2048")),
            "n_gpu_layers": int(params.get("n_gpu_layers", "0")),
            "seed": int(params.get("seed", "0")),
        }
        settings["n_threads"] = threads
        self.llm = llama_cpp.Llama(**settings, verbose=params.get("verbose", "false") == "true")
        self.default_max_tokens = int(params.get("default_max_tokens", "128"))
        vocab = self.llm._model.vocab
        n_vocab = self.llm.n_vocab()
        self.eog = np.array(
            [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)], dtype=np.intc
        )
        instance = args.get("model_instance_name", args.get("model_name", "model"))
        self.counter = common.TokenCounter(pb_utils, args["model_name"], instance)
        effective = {
            **settings,
            "n_threads": self.llm.n_threads,
            "n_ctx": self.llm.n_ctx(),
            "n_vocab": n_vocab,
            "eog_tokens": len(self.eog),
            "llama_cpp_python": getattr(llama_cpp, "__version__", None),
            "lib": os.environ.get("LLAMA_CPP_LIB_PATH"),
        }
        # the name crossover's spec gives this engine (config.pbtxt)
        print(common.settings_line(params["engine"], instance, effective, config), flush=True)

    def _hold_eog(self, until: int, prompt_len: int) -> Any:
        eog = self.eog

        def processor(input_ids: Any, scores: Any) -> Any:
            if len(input_ids) - prompt_len < until:
                scores[eog] = -np.inf
            return scores

        return self._llama_cpp.LogitsProcessorList([processor])

    def _serve(self, request: Any) -> None:
        sender = request.get_response_sender()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            g = common.read_request(pb_utils, request, self.default_max_tokens)
        except (ValueError, TypeError) as exc:
            sender.send(common.error_response(pb_utils, str(exc)), flags=final)
            return
        llm = self.llm
        tokens = llm.tokenize(g.prompt.encode("utf-8"), add_bos=True, special=False)
        hold = g.max_tokens if g.ignore_eos else g.min_tokens
        kwargs: dict[str, Any] = {"reset": True}
        if g.temperature is not None:
            kwargs["temp"] = g.temperature
        if hold > 0 and len(self.eog):
            kwargs["logits_processor"] = self._hold_eog(hold, len(tokens))
        n_out = 0
        pending = b""
        text = chunk = ""
        generated: list[int] = []
        try:
            for token in llm.generate(tokens, **kwargs):
                if n_out >= hold and self._llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                    break
                piece = llm.detokenize([token], prev_tokens=tokens + generated)
                generated.append(token)
                n_out += 1
                pending += piece
                try:  # a multi-byte character may span tokens: send it when whole
                    chunk = pending.decode("utf-8")
                    pending = b""
                except UnicodeDecodeError:
                    chunk = ""
                if g.stream:
                    if n_out >= g.max_tokens:
                        break  # the last token goes out with the final flag below
                    sender.send(common.response(pb_utils, chunk, g, n_out, len(tokens)))
                    chunk = ""
                else:
                    text += chunk
                if n_out >= g.max_tokens:
                    break
        except Exception as exc:  # the engine failed mid-request: the client hears why
            sender.send(common.error_response(pb_utils, f"llama.cpp: {exc}"), flags=final)
            self.counter.add(n_out)
            return
        if g.stream:
            last = chunk + pending.decode("utf-8", errors="replace") if n_out else ""
        else:
            last = text + pending.decode("utf-8", errors="replace")
        self.counter.add(n_out)
        sender.send(common.response(pb_utils, last, g, n_out, len(tokens)), flags=final)

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            self._serve(request)
        return None

    def finalize(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.close()
