"""Themes as files: TOML in themes/ (shipped), and in $XDG_CONFIG_HOME/cockpit/themes (the user's)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from textual.theme import BUILTIN_THEMES, Theme

from cockpit.errors import ConfigError
from cockpit.paths import config_dir

COLOUR_KEYS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background", "surface", "panel", "boost")
DEFAULT_THEME = "cockpit-dark"


def theme_dirs() -> list[Path]:
    here = Path(__file__).resolve()
    return [
        config_dir() / "themes",
        here.parents[2] / "themes",  # a source checkout
        Path(sys.prefix) / "share" / "cockpit" / "themes",  # pip install
    ]


def load_theme_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(str(path), f"not a readable theme: {exc}") from None
    for key in ("name", "base", *COLOUR_KEYS):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(str(path), f"'{key}' must be a string (a colour such as \"#1e90ff\")", key=key)
    if "dark" in data and not isinstance(data["dark"], bool):
        raise ConfigError(str(path), "'dark' must be true or false", key="dark")
    name = data.get("name") or path.stem
    base = data.get("base")
    if base is not None:
        if base not in BUILTIN_THEMES:
            raise ConfigError(str(path), f"base theme '{base}' is not a Textual theme", key="base")
        import dataclasses

        return dataclasses.replace(BUILTIN_THEMES[base], name=name, **{k: data[k] for k in COLOUR_KEYS if k in data})
    if "primary" not in data:
        raise ConfigError(str(path), "a theme needs 'primary' (or 'base' naming a built-in theme)", key="primary")
    unknown = set(data) - set(COLOUR_KEYS) - {"name", "dark", "base"}
    if unknown:
        raise ConfigError(str(path), f"unknown keys: {', '.join(sorted(unknown))}")
    return Theme(name=name, dark=bool(data.get("dark", True)), **{k: data[k] for k in COLOUR_KEYS if k in data})


def available_themes() -> dict[str, Theme]:
    themes: dict[str, Theme] = {}
    for folder in reversed(theme_dirs()):  # the user's files win
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                theme = load_theme_file(path)
                themes[theme.name] = theme
    return themes
