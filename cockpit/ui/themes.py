"""Themes as files: TOML shipped in the package (cockpit/themes), and in $XDG_CONFIG_HOME/cockpit/themes (the user's)."""

from __future__ import annotations

import tomllib
from importlib.resources.abc import Traversable
from pathlib import Path

from textual.theme import BUILTIN_THEMES, Theme

from cockpit.errors import CockpitError, ConfigError
from cockpit.paths import config_dir

COLOUR_KEYS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background", "surface", "panel", "boost")
DEFAULT_THEME = "cockpit-dark"


def user_theme_dir() -> Path:
    return config_dir() / "themes"


def theme_files() -> list[Path | Traversable]:
    """The shipped themes first, then the user's (a user's file of the same name wins)."""
    from cockpit.resources import theme_files as shipped

    folder = user_theme_dir()
    mine = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    return [*shipped(), *mine]


def load_theme_file(path: Path | Traversable) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(str(path), f"not a readable theme: {exc}") from None
    for key in ("name", "base", *COLOUR_KEYS):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(str(path), f"'{key}' must be a string (a colour such as \"#1e90ff\")", key=key)
    if "dark" in data and not isinstance(data["dark"], bool):
        raise ConfigError(str(path), "'dark' must be true or false", key="dark")
    name = data.get("name") or path.name.removesuffix(".toml")
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
    for path in theme_files():
        theme = load_theme_file(path)
        themes[theme.name] = theme
    return themes


def check_theme_name(name: str | None) -> None:
    """--theme NAME: a shipped or user theme file, or a Textual theme; else a clear error."""
    if name and name not in set(available_themes()) | set(BUILTIN_THEMES):
        names = sorted(set(available_themes()) | set(BUILTIN_THEMES))
        raise CockpitError(f"--theme {name}: no such theme; themes: {', '.join(names)}")


def check_ui_settings(config) -> None:
    """[ui] and [keymap] of a config against what exists (theme files, action ids): the TUI and
    `cockpit config check` both refuse the same mistakes, naming file, line and key."""
    from cockpit.config import locate
    from cockpit.ui.actions import ids

    where = str(config.path or "the config")
    theme = config.ui.theme
    known = set(available_themes()) | set(BUILTIN_THEMES)
    if theme and theme not in known:
        raise ConfigError(where, f"no theme named '{theme}'; themes: {', '.join(sorted(known))}",
                          line=locate(config.text, ("ui",), "theme"), key="theme")
    for binding_id, _keys in config.ui.keymap:
        if binding_id not in ids():
            raise ConfigError(where, f"no binding with id '{binding_id}'; ids: {', '.join(sorted(ids()))}",
                              line=locate(config.text, ("keymap",), binding_id), key=binding_id)

