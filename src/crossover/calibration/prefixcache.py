"""The calibration server's prefix cache: whole blocks of prompt tokens, keyed by the chain of
every block before them (as vLLM's and SGLang's block-hash caches are), so only a shared
*prefix* hits. A request's cached tokens are its leading blocks seen before; they cost no
prefill time (``ttft_per_prompt_token_ms`` is charged on the rest) and are reported as
``usage.prompt_tokens_details.cached_tokens``, so a client's reading of the evidence can be
checked against a known truth. Least recently used blocks go first past ``max_blocks``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    def __init__(self, block_tokens: int, max_blocks: int = 100_000) -> None:
        self.block_tokens = block_tokens
        self.max_blocks = max_blocks
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self.hits_tokens = 0
        self.queried_tokens = 0

    def _keys(self, tokens: Sequence[str]) -> list[bytes]:
        keys, h = [], b""
        b = self.block_tokens
        for start in range(0, len(tokens) - b + 1, b):
            h = hashlib.blake2b(h + "\x00".join(tokens[start : start + b]).encode(),
                                digest_size=16).digest()  # fmt: skip
            keys.append(h)
        return keys

    def lookup_and_insert(self, tokens: Sequence[str]) -> int:
        """Tokens of ``tokens`` served from the cache (whole leading blocks); then every
        whole block of it is cached."""
        keys = self._keys(tokens)
        hit = 0
        for k in keys:
            if k not in self._blocks:
                break
            hit += 1
        for k in keys:
            self._blocks[k] = None
            self._blocks.move_to_end(k)
        while len(self._blocks) > self.max_blocks:
            self._blocks.popitem(last=False)
        cached = hit * self.block_tokens
        self.hits_tokens += cached
        self.queried_tokens += len(tokens)
        return cached

    def clear(self) -> None:
        self._blocks.clear()
        self.hits_tokens = self.queried_tokens = 0
