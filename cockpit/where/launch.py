"""Launching where users launch: an engine's server in a container (SGLang's `lmsysorg/sglang` images, vLLM's
`vllm/vllm-openai`), as both projects tell people to serve.

The container is run attached (`docker run --name NAME ... IMAGE python3 -m ...`), not with `-d`: the client
process is what the launch step starts detached, as it starts a bare server, so the server's output goes to
the step's log file, the client's pid lives exactly as long as the container runs, and SIGTERM to it reaches
the container (`docker run` proxies signals when attached without a TTY).  The container keeps its name after
it ends, so Docker can say how it ended (OOMKilled, its exit code); a relaunch removes it first.  On the host's
network, so the port the step names is the server's; the model and draft folders mounted read-only at the same
paths; the step's env as `-e`; GPUs as `--gpus` (Docker) or CDI devices (Podman)."""

from __future__ import annotations

import posixpath

ENGINES = ("docker", "podman")


def container_name(step: str, given: str | None = None) -> str:
    return given or f"cockpit-{step}"


def gpu_args(engine: str, gpus: str) -> list[str]:
    """`all`, `none`, or GPU indices (`0,1,2,3`) as the engine's flags."""
    if gpus == "none":
        return []
    if engine == "podman":
        return ["--device", "nvidia.com/gpu=all"] if gpus == "all" else [a for g in gpus.split(",") for a in ("--device", f"nvidia.com/gpu={g.strip()}")]
    return ["--gpus", "all" if gpus == "all" else f"device={gpus}"]


def run_argv(engine: str, name: str, image: str, server_argv: list[str], mounts: list[str], env: dict[str, str] | None = None,
             gpus: str = "all", extra: list[str] | None = None) -> list[str]:
    """The `docker run` (or `podman run`) that runs `server_argv` (whose first word is the interpreter inside the image)."""
    argv = [engine, "run", "--name", name, "--network", "host", "--ipc", "host", *gpu_args(engine, gpus)]
    for path in dict.fromkeys(m for m in mounts if m):
        argv += ["--volume", f"{path}:{path}:ro"]
    for key, value in (env or {}).items():
        argv += ["--env", f"{key}={value}"]
    argv += list(extra or [])
    return argv + ["--entrypoint", server_argv[0], image, *server_argv[1:]]


def server_part(argv: list[str], image: str) -> list[str]:
    """The server's own command line inside a `run_argv` (for the lint): the entrypoint and what follows the image."""
    if argv[:2] not in (["docker", "run"], ["podman", "run"]) or image not in argv:
        return argv
    at = argv.index(image)
    entry = argv.index("--entrypoint") + 1 if "--entrypoint" in argv[:at] else None
    return ([argv[entry]] if entry is not None else []) + argv[at + 1:]


def in_image(engine: str, image: str, env: dict[str, str] | None = None, extra: list[str] | None = None,
             interpreter: str = "python3") -> list[str]:
    """A prefix that runs the image's interpreter once (its version, its --help), no server started, with the
    environment and the extra `run` arguments the server gets (its mounts among them)."""
    argv = [engine, "run", "--rm", "--network", "none"]
    for key, value in (env or {}).items():
        argv += ["--env", f"{key}={value}"]
    return argv + list(extra or []) + ["--entrypoint", interpreter, image]


def model_mounts(*paths: str | None) -> list[str]:
    """The folders a server reads: each path's own folder (a model dir, a draft dir) mounted as it is on the host."""
    return [p.rstrip("/") if p and not p.endswith((".safetensors", ".json")) else posixpath.dirname(p) if p else "" for p in paths]
