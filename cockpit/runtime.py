"""Process-wide care for the commands that run for days (the TUI, `status --watch`)."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Take what start-up made (modules, the widget tree, the config, connections so far) out of the
    cycle collector's walks: those objects live as long as the process.  Left in, each full collection
    walked all of them (about 29 ms every ~40 s with the TUI at 8 hosts x 8 GPUs, 0.07 % of a core);
    frozen, later collections walk only what came since.  Reference counting still frees them; only a
    reference cycle among them would now outlive its use, and start-up's garbage is collected first."""
    gc.collect()
    gc.freeze()


ERRORS_LOG = "errors.log"
_MAX_ERRORS_LOG = 1 << 20


def record_internal_error(where: str, exc: BaseException) -> None:
    """A bug of the cockpit's own that it survived (a check that raised, a parser that failed on one
    run's log): one line with its traceback's last frame in `$XDG_STATE_HOME/cockpit/errors.log`, so
    that a user can find it and report it.  Never raises; the file is kept under 1 MiB."""
    import time
    import traceback

    from cockpit.paths import state_dir

    try:
        path = state_dir() / ERRORS_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > _MAX_ERRORS_LOG:
            path.replace(path.with_suffix(".log.1"))
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" at {frame.filename.rsplit('/', 2)[-1]}:{frame.lineno}" if frame else ""
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {where}: {type(exc).__name__}: {exc}{at}\n")
    except Exception:  # noqa: BLE001 - reporting a bug must never be one
        pass
