"""SGLang's command line, built from a launch step's parameters (never a shell string)."""

from __future__ import annotations

from cockpit.serving.depth import DepthConfig
from cockpit.serving.server import DEFAULT_PORT


def server_argv(python: str, model_path: str, draft_path: str | None = None, depth: DepthConfig | None = None,
                algorithm: str = "EAGLE3", tp: int | None = None, port: int = DEFAULT_PORT, bind: str | None = None,
                extra_args: list[str] | None = None) -> list[str]:
    """The launch command as an argument list (never a shell string)."""
    argv = [python, "-m", "sglang.launch_server", "--model-path", model_path]
    if tp:
        argv += ["--tp-size", str(tp)]
    argv += ["--port", str(port)]
    if bind:
        argv += ["--host", bind]
    if depth is not None and depth.speculative:
        argv += ["--speculative-algorithm", algorithm]
        if draft_path:
            argv += ["--speculative-draft-model-path", draft_path]
        argv += depth.args()
    argv += list(extra_args or [])
    return argv
