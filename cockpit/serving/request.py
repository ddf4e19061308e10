"""One typed launch request: what a launch step asks of an engine, built and checked once by the core from the step's
parameters (their defaults filled), frozen, and handed to the engine (`Engine.server_argv(request, python)`), to its
launch group and to the container wrapper.  The parameters every engine shares are the core's (`CORE_PARAMS`); each
engine declares those it adds (`Engine.params`: its version, its group's forms), as Harlequin's adapters declare their
options, and the launch step takes both (serving/steps.py LaunchParams); `config check`, `cockpit init --example`, the
step's help and the docs read the declarations.  Data only: this module imports no engine and no registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cockpit.runbook.model import Param
from cockpit.runbook.model import StepSpec
from cockpit.serving.depth import DepthConfig

DEFAULT_PORT = 30000
DEFAULT_DIST_PORT = 20000  # rank 0's rendezvous port of a launch over several nodes

# the parameters of a launch step whatever its engine
CORE_PARAMS: dict[str, Param] = {
    "model_path": Param(str, None, required=True, help="the target model on the host"),
    "draft_path": Param(str, None, help="the EAGLE-3 draft directory on the host"),
    "algorithm": Param(str, "EAGLE3"),
    "engine": Param(str, "sglang", help="the engine that serves (default sglang)"),
    "depth": Param(int, None, help="a topk-1 chain of N steps, N + 1 draft tokens (vLLM's num_speculative_tokens N)"),
    "draft_tokens": Param(int, None, help="SGLang's --speculative-num-draft-tokens (alone: a topk-1 chain, steps N - 1)"),
    "steps": Param(int, None, help="SGLang's --speculative-num-steps"),
    "topk": Param(int, None, help="SGLang's --speculative-eagle-topk"),
    "tp": Param(int, None, help="tensor parallel size"),
    "port": Param(int, DEFAULT_PORT),
    "bind": Param(str, None, help="--host for the server (default: the engine's own, 127.0.0.1 for SGLang)"),
    "extra_args": Param(list, None, help="more of the engine's flags, as a list of words"),
    "env": Param(dict, None),
    "log": Param(str, None),
    "python": Param(str, None, help="the interpreter with the engine on the host (default: the host's 'python')"),
    "help_text": Param(str, None, help="a local file with the engine's --help, instead of asking the host"),
    "lint": Param(bool, True),
    "settle_s": Param((int, float), 3.0),
    "cwd": Param(str, None),
    # a launch group: one server over several nodes (serving/group.py drives it; each engine brings its command lines)
    "hosts": Param(list, None, help="instead of host: every node of a multi-node launch, rank 0 first"),
    "nnodes": Param(int, None, help="the number of nodes (a check: it must equal the number of hosts)"),
    "dist_init_port": Param(int, DEFAULT_DIST_PORT, help="rank 0's rendezvous port (vLLM: its --data-parallel-rpc-port, "
                            "--master-port with parallel = 'model', the Ray GCS port with 'ray')"),
    "dist_init_addr": Param(str, None, help="host:port of rank 0 as the other nodes reach it (default: rank 0's address and "
                            "dist_init_port)"),
    "join_timeout_s": Param((int, float), 600.0, help="how long the cockpit waits for every node to join"),
    # in a container, as the engines' own images are run (where/launch.py)
    "image": Param(str, None, help="run the server in a container of this image (docker run ... IMAGE python3 -m ...)"),
    "container_name": Param(str, None, help="the container's name (default cockpit-STEP); a relaunch replaces it"),
    "container_engine": Param(str, "docker", help="docker or podman"),
    "container_gpus": Param(str, "all", help="the GPUs the container sees: all, none, or indices such as 0,1,2,3"),
    "container_args": Param(list, None, help="more `run` arguments, as a list of words (mounts, --shm-size, ...)"),
}


def depth_of(params: Mapping[str, Any]) -> DepthConfig | None:
    """The configuration a launch step's parameters ask for: `depth` N (steps of a topk-1 chain),
    or SGLang's own `steps`/`topk`/`draft_tokens`; `draft_tokens` alone is a topk-1 chain of that many
    draft tokens (N - 1 steps).  None: no depth given (the command line's own flags, if any, rule)."""
    if params.get("depth") is not None:
        return DepthConfig.chain(params["depth"])
    if params.get("steps") is not None:
        topk = params.get("topk") or 1
        return DepthConfig(params["steps"], topk, params.get("draft_tokens") or (params["steps"] + 1 if topk == 1 else None))
    if params.get("draft_tokens") is not None:
        return DepthConfig.of_draft_tokens(params["draft_tokens"])
    return None


@dataclass(frozen=True)
class LaunchRequest:
    """A launch step's request, typed: what every engine's command line, group and container read."""

    engine: str
    model_path: str
    draft_path: str | None = None
    algorithm: str = "EAGLE3"
    depth: DepthConfig | None = None
    tp: int | None = None
    port: int = DEFAULT_PORT
    bind: str | None = None
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    python: str | None = None  # the interpreter the step names (None: the host's)
    help_text: str | None = None  # a local file with the engine's --help (instead of asking the host)
    lint: bool = True  # the command line is linted before the launch
    log: str | None = None
    hosts: tuple[str, ...] = ()  # every node, rank 0 first: one for a single-host launch
    dist_init_port: int = DEFAULT_DIST_PORT
    dist_init_addr: str | None = None
    join_timeout_s: float = 600.0
    image: str | None = None  # in a container of this image (where/launch.py), with the container_* settings below
    container_engine: str = "docker"
    container_name: str | None = None
    container_gpus: str = "all"
    container_args: tuple[str, ...] = ()
    # what the engine declared (Engine.params), as given or defaulted: its version, its group's form, ...
    engine_params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    def param(self, key: str) -> Any:
        """An engine-declared parameter's value (its default when the step left it out)."""
        return self.engine_params.get(key)

    def python_on(self, host_python: str) -> str:
        """The interpreter on a node: the step's, else the host's own."""
        return self.python or host_python

    @classmethod
    def of(cls, spec: StepSpec, engine_params: Mapping[str, Param] | None = None) -> LaunchRequest:
        """The request a launch step's parameters make (validated by the step kind before: types and cross-checks)."""
        p = spec.params
        hosts = tuple(p.get("hosts") or ([spec.host] if spec.host else []))
        declared = {key: p.get(key, param.default) for key, param in (engine_params or {}).items()}
        return cls(engine=str(p.get("engine") or CORE_PARAMS["engine"].default), model_path=str(p["model_path"]),
                   draft_path=p.get("draft_path"), algorithm=str(p.get("algorithm") or "EAGLE3"), depth=depth_of(p),
                   tp=p.get("tp"), port=int(p.get("port") or DEFAULT_PORT), bind=p.get("bind"),
                   extra_args=tuple(p.get("extra_args") or ()), env=MappingProxyType(dict(p.get("env") or {})),
                   python=p.get("python"), help_text=p.get("help_text"), lint=bool(p.get("lint", True)), log=p.get("log"), hosts=hosts,
                   dist_init_port=int(p.get("dist_init_port") or DEFAULT_DIST_PORT), dist_init_addr=p.get("dist_init_addr"),
                   join_timeout_s=float(p.get("join_timeout_s", 600.0)), image=p.get("image"),
                   container_engine=str(p.get("container_engine") or "docker"), container_name=p.get("container_name"),
                   container_gpus=str(p.get("container_gpus", "all")), container_args=tuple(p.get("container_args") or ()),
                   engine_params=MappingProxyType(declared))
