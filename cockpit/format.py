"""The one formatter of ages, durations and numbers for every text the cockpit prints or shows."""

from __future__ import annotations

import shlex
import time


def age(ts: float | None, now: float | None = None, long: bool = False) -> str:
    """'12 s ago', '4 min ago', '3.2 h ago' (long=True: a date after 90 minutes); '' for None."""
    if ts is None:
        return ""
    seconds = max(0.0, (time.time() if now is None else now) - ts)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if long:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
    return f"{seconds / 3600:.1f} h ago"


def clock(ts: float) -> str:
    """A moment as the local wall clock says it: 14:03:27."""
    return time.strftime("%H:%M:%S", time.localtime(ts))


def duration(seconds: float | None) -> str:
    """'45 s', '12 min', '2 h 05 min', '3 d 4 h'; '-' for None."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    hours, rest = divmod(int(seconds), 3600)
    if hours < 48:
        return f"{hours} h {rest // 60:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def num(value, fmt: str = "{:.1f}", missing: str = "-") -> str:
    """A number for a table cell; `missing` when there is none."""
    return missing if value is None else fmt.format(value)


def value(value, unit: str = "", width: int = 0, digits: int = 0) -> str:
    """A reading with its unit, 'n/a' when the source gave none, right-aligned to width."""
    if value is None:
        text = "n/a"
    elif isinstance(value, float):
        text = f"{value:.{digits}f}{unit}"
    else:
        text = f"{value}{unit}"
    return text.rjust(width)


def plural(count: int, word: str, many: str | None = None) -> str:
    """'1 process', '2 processes' (no 'process(es)')."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def time_left(eta_s: float | None, done: int | None = None, total: int | None = None) -> str:
    """'about 2 min left', or '' when nothing is left to estimate (finished, or under a second)."""
    if eta_s is None or eta_s < 1 or (done is not None and total is not None and done >= total):
        return ""
    return f"about {duration(eta_s)} left"


def shell_words(words) -> str:
    """Command-line words as one line a shell reads back as the same words (quoted where needed): every
    command line and fix the cockpit prints can be pasted as it is."""
    return shlex.join(str(w) for w in words)


def size(count: float) -> str:
    """Bytes as a person reads them, the same in every pane and command: 812 B, 96.0 KiB, 104.9 MiB, 3.27 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}" if unit == "GiB" else f"{count / scale:.1f} {unit}"
    return f"{int(count)} B"
