"""Where the cockpit mirrors Textual's private code (the quiet input driver): the Textual versions that
code was read from.  On any other version it steps aside and Textual's own driver runs (correct, only
slower), so an upgrade of Textual cannot run a stale copy of its internals.  docs/textual-departures.md
says what each departure from Textual's public way buys, measured."""

from __future__ import annotations

import os

import textual

READ_FROM = frozenset({"8.2.8"})  # LinuxDriver.run_input_thread was read from these
# pyproject.toml pins textual to the 8.2 series (>=8.2.8,<8.3): a release there other than those above
# runs Textual's own driver (tests/test_quiet_ui.py checks the guard both ways)


def mirrored(version: str | None = None) -> bool:
    """Whether the running Textual (or `version`) is exactly one the mirrored code was read from."""
    return (textual.__version__ if version is None else version) in READ_FROM


def terminal_driver(app):
    """The driver that owns the terminal, to write an alert's bell and desktop-notification escape between frames
    (Textual has no public way to write raw bytes to its terminal; `App.bell` rings but notifies nothing).  Read from
    `App._driver` on the releases in READ_FROM only; elsewhere None, and the alert goes out by its other channels
    (the alert log, URLs, the message bar) with the terminal channel saying it could not write."""
    return getattr(app, "_driver", None) if mirrored() else None


def mouse_switch(app):
    """A function that turns the terminal's mouse reporting on or off while the app runs (Textual switches it only at
    start, `App.run(mouse=...)`): the Linux driver's `_enable_mouse_support` / `_disable_mouse_support` (the escape
    sequences it writes at start and exit), on the releases in READ_FROM only; elsewhere, or headless, None."""
    driver = terminal_driver(app)
    enable, disable = getattr(driver, "_enable_mouse_support", None), getattr(driver, "_disable_mouse_support", None)
    if driver is None or not callable(enable) or not callable(disable) or getattr(driver, "is_headless", False):
        return None

    def switch(on: bool) -> None:
        (enable if on else disable)()

    return switch


def terminal_theme_of(line_filter):
    """The terminal theme an ANSIToTruecolor filter reads, as part of ui/line_filters.py's cache key (a theme changed
    in place must not reuse the styles filtered for the old one).  `ANSIToTruecolor._terminal_theme` on the releases
    in READ_FROM; elsewhere None, and the key is the filter's identity alone (its styles are then dropped only when
    the app makes a new filter)."""
    return getattr(line_filter, "_terminal_theme", None) if mirrored() else None


DEPARTURES = ("driver", "rows")  # the quiet input driver, HostPane's own rows (the covering compositor went: 0.08 %)


def plain(part: str) -> bool:
    """Whether `part` is to run Textual's own way: COCKPIT_TEXTUAL_PLAIN=driver,rows (or "all")
    switches departures off one by one, to measure what each buys (tests/perf/attribute_tui.py)."""
    wanted = {p.strip() for p in os.environ.get("COCKPIT_TEXTUAL_PLAIN", "").split(",") if p.strip()}
    return part in wanted or "all" in wanted
