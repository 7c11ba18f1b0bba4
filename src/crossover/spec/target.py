"""A sweep's targets: a running server (``url``, or ``urls`` of identical replicas) or
an engine to launch (``launch``), the launch block validated once, with the file, into a
``LaunchTarget``: the engine's ``EngineConfig`` keys, its name known to the registry,
and how many replicas to start. A ``--target NAME=URL[,k=v]`` flag is read into the same
keys (``parse_target``)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from crossover.devices import VISIBLE, own_entries, replica_devices
from crossover.engines import registry
from crossover.engines.config import EngineConfig
from crossover.engines.spec import EngineSpec
from crossover.errors import unknown_choice
from crossover.spec.run import base_url, parse_named_url
from crossover.transport import TransportName


class ReplicasConfig(BaseModel):
    """The keys of a ``launch:`` block that say how many copies of the engine to start."""

    model_config = {"extra": "forbid"}

    replicas: int = Field(
        1,
        ge=1,
        description="identical copies of the engine, each on its own port; the load goes "
        "round robin over them (request i to replica i mod N)",
    )
    gpus_per_replica: int | None = Field(
        None,
        ge=1,
        description="replica k gets CUDA_VISIBLE_DEVICES = GPUs k*K .. k*K+K-1 (K this value) "
        "of those crossover's own CUDA_VISIBLE_DEVICES lists (else of the machine's); not "
        "with CUDA_VISIBLE_DEVICES in env",
    )


class AfterStartConfig(BaseModel):
    """The keys of a ``launch:`` block that say what the sweep does to the started engine
    besides sending it load."""

    model_config = {"extra": "forbid"}

    freeze_gc: bool = Field(
        False,
        description="before each level (its warm-up included), POST the engine's GC-freeze "
        "endpoint (SGLang's /freeze_gc): the objects its front end holds then go to "
        "Python's permanent generation, so its later full collections (~0.5 s each with "
        "a million objects, measured) skip them; only engines that have one (SGLang). "
        "Default off: the engine as deployed by default",
    )


#: keys of a ``launch:`` block that are the sweep's, not the engine's
REPLICA_KEYS: tuple[str, ...] = (
    *ReplicasConfig.model_fields,
    *AfterStartConfig.model_fields,
)


class LaunchTarget(EngineConfig, ReplicasConfig, AfterStartConfig):
    """A target's ``launch:`` block: the engine's launch config, its replicas, and what the
    sweep does to the started engine."""

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        try:
            registry.get(value)
        except registry.UnknownEngine as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _gpus_chosen_once(self) -> LaunchTarget:
        if self.gpus_per_replica is not None and "CUDA_VISIBLE_DEVICES" in self.env:
            raise ValueError(
                "gpus_per_replica and env CUDA_VISIBLE_DEVICES both choose the GPUs; give "
                "one of them"
            )
        return self

    @model_validator(mode="after")
    def _freeze_gc_endpoint(self) -> LaunchTarget:
        if self.freeze_gc and registry.get(self.engine).freeze_gc_path is None:
            raise ValueError(
                f"freeze_gc: true needs an engine with a GC-freeze endpoint (SGLang's "
                f"/freeze_gc); {registry.get(self.engine).display_name} has none"
            )
        return self

    @property
    def adapter(self) -> EngineSpec:
        """The engine's spec in the registry (the name was checked with the file)."""
        return registry.get(self.engine)

    def engine_config(self) -> EngineConfig:
        """The engine's own keys, as the engines package takes them (not validated again)."""
        return EngineConfig.model_construct(
            **{k: getattr(self, k) for k in EngineConfig.model_fields},
            _fields_set=self.model_fields_set - set(REPLICA_KEYS),
        )


class TargetConfig(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.+-]+$",
        description="the target's name in tables, charts and --only (letters, digits, _.+-)",
    )
    url: str | None = Field(
        None, description="base URL of a running server (http://host:8000, no /v1); or launch"
    )
    urls: list[str] | None = Field(
        None,
        min_length=1,
        description="base URLs of identical running replicas, instead of url: request i goes "
        "to replica i mod N (data parallelism)",
    )
    engine: str | None = Field(
        None,
        description="request dialect of a URL target (openai, vllm, sglang, trtllm, triton, "
        "llamacpp, transformers); for a launched target, the engine to launch",
    )
    model: str | None = Field(
        None,
        description="model name sent in requests (default: for a URL target, the one "
        "model its server lists; for launch, the launched model's path)",
    )
    launch: LaunchTarget | None = Field(
        None, description="launch this engine instead of measuring a URL: the keys below"
    )
    roofline: dict[str, Any] | None = Field(
        None, description="this target's roofline facts (the keys of roofline, below)"
    )
    concurrency: list[int] | None = Field(
        None,
        min_length=1,
        description="this target's own levels (default: the sweep's), e.g. one engine goes further",
    )
    transport: TransportName | None = Field(
        None,
        description="this target's HTTP client (default: the sweep's transport), e.g. two "
        "targets on one engine that differ only in the client",
    )
    resources: dict[str, float] | None = Field(
        None,
        description="with --ray: the Ray resources this target's actor (its engine and load) "
        "asks for, e.g. {GPU: 2} or {CPU: 4, node-b: 1} (custom ones as `ray start "
        "--resources` names them); default CPU 1 and, for a launched engine, GPU = "
        "replicas x gpus_per_replica, else one launch's tp x pp (x dp) as its command "
        "gives them, extra_args included: the replicas share those (GPU: 0 for an engine "
        "on CPU)",
    )

    @model_validator(mode="before")
    @classmethod
    def _launch_engine(cls, data: Any) -> Any:
        """A launch block's ``engine`` defaults to the target's."""
        if isinstance(data, dict) and isinstance(data.get("launch"), dict):
            launch = data["launch"]
            if "engine" not in launch and data.get("engine") is not None:
                data = {**data, "launch": {**launch, "engine": data["engine"]}}
        return data

    @field_validator("resources")
    @classmethod
    def _resources(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and any(not q >= 0 or math.isinf(q) for q in v.values()):
            raise ValueError("resources: each amount must be a number, 0 or more")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return base_url(v) if v is not None else None

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str] | None) -> list[str] | None:
        return [base_url(u) for u in v] if v is not None else None

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(c < 1 for c in v):
            raise ValueError("concurrency levels must be at least 1")
        return sorted(set(v)) if v is not None else None

    @model_validator(mode="after")
    def _one_kind(self) -> TargetConfig:
        kinds = [k for k in ("url", "urls", "launch") if getattr(self, k) is not None]
        if not kinds:
            raise ValueError(f"target {self.name}: give either url or launch")
        if len(kinds) > 1:
            raise ValueError(
                f"target {self.name}: give one of url, urls or launch, not {' and '.join(kinds)}"
            )
        remote = self.launch is None
        if remote and self.engine is not None and registry.dialect_of(self.engine) is None:
            raise ValueError(unknown_choice("engine", self.engine, registry.ENGINE_OR_DIALECT))
        return self

    @property
    def engine_gpus(self) -> str | None:
        """The ``CUDA_VISIBLE_DEVICES`` its engines start with where it sets one: its
        launch env's, or with ``gpus_per_replica`` the first replicas x gpus_per_replica
        GPUs of crossover's own ``CUDA_VISIBLE_DEVICES`` (in their own form), or of the
        machine's where it is not set (``TargetSession.replica_gpus`` without Ray);
        ``None`` where they keep crossover's own (a URL target's, whose server may be
        elsewhere)."""
        if self.launch is None:
            return None
        if VISIBLE in self.launch.env:
            return self.launch.env[VISIBLE]
        if self.launch.gpus_per_replica is not None:
            n = self.launch.replicas * self.launch.gpus_per_replica
            return replica_devices(own_entries(), 0, n)
        return None

    @property
    def base_urls(self) -> list[str]:
        """The running server's base URLs: one for ``url``, N for ``urls``, none for launch."""
        if self.urls is not None:
            return list(self.urls)
        return [self.url] if self.url is not None else []


def parse_target(text: str, engine: str | None, model: str | None) -> dict[str, Any]:
    """``NAME=URL[,engine=vllm,model=M]``."""
    name, url, settings = parse_named_url(text, "--target")
    out: dict[str, Any] = {"name": name, "url": url, "engine": engine, "model": model}
    out.update(settings)
    if out["engine"] is None:
        out["engine"] = "openai"
    return out
