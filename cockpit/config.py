"""The cockpit's TOML config: hosts, SSH settings and telemetry rates.

Every error names the file, the line and the key, so a typo in a 200-line config is found at once.
"""

from __future__ import annotations

import difflib
import getpass
import re
import socket
import tomllib
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cockpit.errors import ConfigError
from cockpit.paths import default_config_path

DEFAULT_CONNECT_TIMEOUT = 10.0
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def setting(default: Any = None, *, minimum: float | None = None, key: str | None = None, toml: bool = True) -> Any:
    """A config setting, declared once: its default, its lower bound and its TOML key (when not the field's
    name) live here, and `read_settings` reads, types and checks it from the table (`toml=False`: not a
    key of the table, given by its reader)."""
    return field(default=default, metadata={"minimum": minimum, "key": key, "toml": toml})


def setting_keys(cls) -> set[str]:
    """The TOML keys of a settings class's table."""
    return {f.metadata.get("key") or f.name for f in fields(cls) if f.metadata.get("toml", True)}


@dataclass(frozen=True)
class HostConfig:
    name: str
    address: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = setting(None)
    jump_host: str | None = setting(None)
    connect_timeout: float = setting(DEFAULT_CONNECT_TIMEOUT, minimum=0.1)
    roles: tuple[str, ...] = ()
    local: bool = False
    keepalive_interval: float = setting(15.0, minimum=1.0)
    max_channels: int = setting(8, minimum=1)
    nvidia_smi: str = setting("nvidia-smi")
    telemetry: str = "auto"  # auto | smi | nvml (nvml only for a local host) | prometheus
    python: str = setting("python3")
    known_hosts: str | None = setting(None)
    accent: str | None = setting(None)
    prometheus_host: str | None = setting(None)  # the host's label value in Prometheus (default: its name)
    kill_any_user: bool = setting(False)  # the process table may kill other users' processes too (shown as such first)

    @property
    def ssh_reachable(self) -> bool:
        """Can processes be listed, killed and launched there (SSH, or this machine)?"""
        return self.local or self.address is not None

    @property
    def label(self) -> str:
        if self.local:
            return f"{self.name} (local)"
        if self.address is None and self.telemetry == "prometheus":
            return f"{self.name} (Prometheus)"
        target = self.address or self.name
        if self.user:
            target = f"{self.user}@{target}"
        if self.port:
            target = f"{target}:{self.port}"
        return f"{self.name} ({target})"


@dataclass(frozen=True)
class SshSettings:
    known_hosts: str = setting("~/.ssh/known_hosts")
    config_files: tuple[str, ...] = setting(("~/.ssh/config",), key="config")
    stagger_ms: int = setting(50, minimum=0)
    backoff_initial_s: float = setting(1.0, minimum=0.01)
    backoff_max_s: float = setting(60.0, minimum=0.01)


@dataclass(frozen=True)
class TelemetrySettings:
    interval_ms: int = setting(1000, minimum=100)
    processes_interval_s: float = setting(5.0, minimum=0.5)  # poll compute processes at most this often, when GPU memory moved
    processes_max_age_s: float = setting(30.0, minimum=0.5)  # and at least this often when nothing moved
    history: int = setting(300, minimum=2)
    stale_after_s: float | None = setting(None, minimum=0.5)  # default: max(3 intervals, 5 s)
    server_poll_s: float = setting(1.0, minimum=0.1)  # the served server (its log, health, figures) is looked at this often

    @property
    def stale_after(self) -> float:
        if self.stale_after_s is not None:
            return self.stale_after_s
        return max(3 * self.interval_ms / 1000.0, 5.0)


@dataclass(frozen=True)
class UiSettings:
    theme: str | None = setting(None)  # a theme file's name (themes/), or a Textual theme
    ascii: bool = setting(False)  # ASCII borders and glyphs (old terminals, some tmux setups)
    mouse: bool = setting(True)  # the cockpit takes the mouse (clicks, wheel); false: the terminal (tmux) selects text
    keymap: tuple[tuple[str, str], ...] = setting((), toml=False)  # (binding id, keys): the [keymap] table


@dataclass(frozen=True)
class PrometheusSettings:
    """[prometheus]: GPUs read from a Prometheus that scrapes NVIDIA's DCGM exporter (one query per
    interval for every GPU of every host that says telemetry = "prometheus")."""

    url: str
    host_label: str | None = setting(None)  # None: Hostname or hostname (the exporter renamed it in 2026)
    token_env: str | None = setting(None)  # an environment variable holding a bearer token
    selector: str | None = setting(None)  # extra label matchers, e.g. 'cluster="prod"'
    interval_s: float = setting(5.0, minimum=0.5)
    timeout_s: float = setting(5.0, minimum=0.1)
    stale_after_s: float = setting(90.0, minimum=1.0)  # a sample older than this is shown stale (DCGM's default interval is 30 s)
    gone_after_s: float = setting(300.0, minimum=1.0)  # a host with no series for this long is gone
    server_selector: str | None = setting(None)  # the serving engine's own series there (e.g. 'job="sglang"'): the serving pane reads them
    sglang_selector: str | None = setting(None)  # its old name (SGLang's series only, then): read as server_selector


@dataclass(frozen=True)
class StorageSettings:
    """[storage]: where the cockpit keeps what it writes for this config (runbook state and audit log,
    benchmark runs, the alert log, caches).  Default: the XDG folders.  A relative dir is relative to the
    config file, so a config and its state can travel together (the demo's does)."""

    dir: str | None = setting(None)


@dataclass(frozen=True)
class Config:
    path: Path | None
    hosts: tuple[HostConfig, ...]
    ssh: SshSettings = field(default_factory=SshSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    ui: UiSettings = field(default_factory=UiSettings)
    prometheus: PrometheusSettings | None = None
    storage: StorageSettings = field(default_factory=StorageSettings)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    text: str = field(default="", compare=False, repr=False)
    implicit: bool = False  # no config file: this machine only

    @property
    def storage_dir(self) -> Path | None:
        """[storage] dir as a path (relative to the config's folder), or None for the XDG folders."""
        if self.storage.dir is None:
            return None
        folder = Path(self.storage.dir).expanduser()
        if not folder.is_absolute() and self.path is not None:
            folder = self.path.expanduser().resolve().parent / folder
        return folder

    def host(self, name: str) -> HostConfig:
        for host in self.hosts:
            if host.name == name:
                return host
        known = ", ".join(h.name for h in self.hosts) or "none"
        extra = did_you_mean(name, [h.name for h in self.hosts])
        if self.implicit:
            raise ConfigError("no config", f"no host named '{name}': without a config the cockpit knows this machine only "
                              f"({known}); `cockpit init` writes a config, `cockpit demo` shows the whole flow")
        raise ConfigError(str(self.path), f"no host named '{name}'{extra}; hosts: {known}")


# --- locating keys in the source text -------------------------------------------------------------

_HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_RE = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.-]+)\s*=")


def _split_dotted(text: str) -> list[str]:
    parts, buf, quote = [], "", None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
            else:
                buf += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(buf.strip())
            buf = ""
        else:
            buf += ch
    parts.append(buf.strip())
    return parts


def locate(text: str, table: tuple[str, ...], key: str | None = None) -> int | None:
    """Line number (1-based) of ``key`` inside ``[table]`` (or of the table header when key is None)."""
    current: tuple[str, ...] = ()
    header_line = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER_RE.match(line)
        if header:
            current = tuple(_split_dotted(header.group(1)))
            if current == table or (key is None and table and current[: len(table)] == table):
                header_line = number
                if key is None:
                    return number
            continue
        if key is None:
            continue
        match = _KEY_RE.match(line)
        if not match:
            continue
        name = tuple(_split_dotted(match.group(1)))
        if current + name == table + (key,):
            return number
    return header_line


# --- validation -----------------------------------------------------------------------------------


# a release as engines print theirs (PEP 440's public part, and a local one: 0.10.2+cu128, 0.11.1.dev7+g1a2b3c)
VERSION_RE = re.compile(r"^v?\d+\.\d+(?:\.\d+){0,2}(?:\.?(?:post|rc|dev|a|b)\d+)*(?:\+[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)?$")


def version_problem(text: str, what: str = "an SGLang version", example: str = "e.g. 0.5.2 or 0.4.6.post5") -> str | None:
    """None for a release number (0.5.2, 0.4.6.post5, 0.5.23rc1, 0.10.2+cu128, 0.10.1.1), else what is wrong with `text`: the one
    check of a version every engine's setting and flag uses."""
    return None if VERSION_RE.match(text.strip()) else f"'{text}' is not {what} ({example})"


def did_you_mean(word: str, choices, template: str = " (did you mean '{}'?)") -> str:
    """' (did you mean 'x'?)' for the closest of `choices`, or '' when none is close: the one way every
    message of the cockpit suggests a name (hosts, steps, kinds, keys, parameters)."""
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return template.format(close[0]) if close else ""


class Checker:
    """The validation of one config file, shared by every table reader (runs, alerts, runbook,
    benchmarks): errors name the file, the line and the key."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text

    def fail(self, table: tuple[str, ...], key: str | None, message: str) -> ConfigError:
        return ConfigError(self.path, message, line=locate(self.text, table, key), key=key)

    def unknown_keys(self, table: tuple[str, ...], data: dict[str, Any], allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                hint = did_you_mean(key, allowed)
                raise self.fail(table, key, f"unknown key{hint}; allowed: {', '.join(sorted(allowed))}")

    def unknown_tables(self, raw: dict[str, Any], allowed: set[str]) -> None:
        for key in raw:
            if key not in allowed:
                hint = did_you_mean(key, allowed, " (did you mean [{}]?)")
                what = "table" if isinstance(raw[key], (dict, list)) else "key"
                raise self.fail((key,) if what == "table" else (), None if what == "table" else key,
                                f"unknown {what} '{key}'{hint}; the config has: {', '.join(f'[{a}]' for a in sorted(allowed))}")

    def read_settings(self, table: tuple[str, ...], data: dict[str, Any], cls, **given):
        """An instance of `cls` from its table: every field declared with `setting()` read under its key,
        typed by its annotation, with its declared default and bound; `given`: what the caller read itself."""
        hints = typing.get_type_hints(cls)
        values = dict(given)
        for f in fields(cls):
            if f.name in given or not f.metadata.get("toml", False):
                continue  # given by the caller, or not declared with setting()
            kind = hints[f.name]
            if isinstance(kind, types.UnionType):
                kind = next(k for k in typing.get_args(kind) if k is not type(None))
            if kind not in (int, float, str, bool):
                continue  # a list or table: its reader gives it
            values[f.name] = self.get(table, data, f.metadata.get("key") or f.name, kind, f.default, minimum=f.metadata.get("minimum"))
        return cls(**values)

    def get(self, table, data, key, kind, default, *, minimum=None):
        if key not in data:
            return default
        value = data[key]
        names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list"}
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise self.fail(table, key, f"must be {names[kind]}, got {type(value).__name__} {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(table, key, f"must be at least {minimum}, got {value!r}")
        if kind is str and not value.strip():
            raise self.fail(table, key, "must not be empty")
        return value


_HOST_KEYS = {f.name for f in fields(HostConfig) if f.name != "name"}


def _parse_host(check: Checker, name: str, data: Any) -> HostConfig:
    table = ("hosts", name)
    if not isinstance(data, dict):
        raise check.fail(("hosts",), name, "each host must be a table: [hosts.NAME]")
    if not HOST_NAME_RE.match(name):
        raise check.fail(table, None, f"host name '{name}' may hold only letters, digits, '.', '_' and '-'")
    check.unknown_keys(table, data, _HOST_KEYS)
    local = check.get(table, data, "local", bool, False)
    address = check.get(table, data, "address", str, None)
    telemetry = check.get(table, data, "telemetry", str, "auto")
    if not local and address is None and telemetry != "prometheus":
        raise check.fail(table, None, f"host '{name}' needs 'address' (an IP, DNS name or ~/.ssh/config alias) or 'local = true' "
                         "(or telemetry = \"prometheus\": its GPUs from Prometheus, without SSH)")
    if address is not None and (address.startswith("-") or any(c.isspace() for c in address)):
        raise check.fail(table, "address", f"'{address}' is not a host address")
    user = check.get(table, data, "user", str, None)
    if user is not None and (user.startswith("-") or any(c.isspace() or c == "@" for c in user)):
        raise check.fail(table, "user", f"'{user}' is not a user name")
    port = check.get(table, data, "port", int, None)
    if port is not None and not 0 < port < 65536:
        raise check.fail(table, "port", f"must be between 1 and 65535, got {port}")
    roles = check.get(table, data, "roles", list, [])
    for role in roles:
        if not isinstance(role, str) or not role:
            raise check.fail(table, "roles", f"roles must be non-empty strings, got {role!r}")
    if telemetry not in ("auto", "smi", "nvml", "prometheus"):
        raise check.fail(table, "telemetry", f"must be 'auto', 'smi', 'nvml' or 'prometheus', got '{telemetry}'")
    if telemetry == "nvml" and not local:
        raise check.fail(table, "telemetry", "NVML reads only the machine the cockpit runs on: use it with 'local = true'")
    return check.read_settings(table, data, HostConfig, name=name, address=address, user=user, port=port, roles=tuple(roles),
                               local=local, telemetry=telemetry)


def parse_config(text: str, path: str = "<config>") -> Config:
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows editors write one): TOML has none, the file means the same
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column \d+\)", message)
        line = int(match.group(1)) if match else None
        raise ConfigError(path, f"not valid TOML: {message}", line=line) from None
    check = Checker(path, text)
    check.unknown_tables(raw, {"hosts", "ssh", "telemetry", "runbook", "bench", "ui", "keymap", "runs", "alerts", "prometheus", "storage"})

    ssh_raw = raw.get("ssh", {})
    if not isinstance(ssh_raw, dict):
        raise check.fail((), "ssh", "must be a table: [ssh]")
    check.unknown_keys(("ssh",), ssh_raw, setting_keys(SshSettings))
    config_files = ssh_raw.get("config", list(SshSettings.config_files))
    if isinstance(config_files, str):
        config_files = [config_files]
    if not isinstance(config_files, list) or not all(isinstance(c, str) for c in config_files):
        raise check.fail(("ssh",), "config", "must be a path or a list of paths")
    ssh = check.read_settings(("ssh",), ssh_raw, SshSettings, config_files=tuple(config_files))

    tel_raw = raw.get("telemetry", {})
    if not isinstance(tel_raw, dict):
        raise check.fail((), "telemetry", "must be a table: [telemetry]")
    check.unknown_keys(("telemetry",), tel_raw, setting_keys(TelemetrySettings))
    telemetry = check.read_settings(("telemetry",), tel_raw, TelemetrySettings)

    ui_raw = raw.get("ui", {})
    if not isinstance(ui_raw, dict):
        raise check.fail((), "ui", "must be a table: [ui]")
    check.unknown_keys(("ui",), ui_raw, setting_keys(UiSettings))
    keymap_raw = raw.get("keymap", {})
    if not isinstance(keymap_raw, dict):
        raise check.fail((), "keymap", "must be a table: [keymap] with binding id = \"keys\"")
    for binding_id, keys in keymap_raw.items():
        if not isinstance(keys, str) or not keys.strip():
            raise check.fail(("keymap",), binding_id, "must be a key or comma-separated keys, e.g. \"r,ctrl+r\"")
    ui = check.read_settings(("ui",), ui_raw, UiSettings, keymap=tuple(keymap_raw.items()))

    storage_raw = raw.get("storage", {})
    if not isinstance(storage_raw, dict):
        raise check.fail((), "storage", "must be a table: [storage] with dir")
    check.unknown_keys(("storage",), storage_raw, setting_keys(StorageSettings))
    storage = check.read_settings(("storage",), storage_raw, StorageSettings)

    hosts_raw = raw.get("hosts", {})
    if not isinstance(hosts_raw, dict):
        raise check.fail((), "hosts", "must be a table of hosts: [hosts.NAME]")
    hosts = tuple(_parse_host(check, name, data) for name, data in hosts_raw.items())
    names = {h.name for h in hosts}
    for host in hosts:
        if host.jump_host and host.jump_host in names and host.jump_host == host.name:
            raise check.fail(("hosts", host.name), "jump_host", "a host cannot be its own jump host")
    _check_jump_cycles(check, hosts)
    prometheus = _parse_prometheus(check, raw)
    watched = [h.name for h in hosts if h.telemetry == "prometheus"]
    if watched and prometheus is None:
        raise check.fail(("hosts", watched[0]), "telemetry", "telemetry = \"prometheus\" needs a [prometheus] table with its url")
    return Config(path=Path(path) if path != "<config>" else None, hosts=hosts, ssh=ssh, telemetry=telemetry, ui=ui,
                  prometheus=prometheus, storage=storage, raw=raw, text=text)


def _parse_prometheus(check: Checker, raw: dict[str, Any]) -> PrometheusSettings | None:
    data = raw.get("prometheus")
    if data is None:
        return None
    table = ("prometheus",)
    if not isinstance(data, dict):
        raise check.fail((), "prometheus", "must be a table: [prometheus] with url")
    check.unknown_keys(table, data, setting_keys(PrometheusSettings) | {"url"})
    url = check.get(table, data, "url", str, None)
    if url is None:
        raise check.fail(table, None, "[prometheus] needs url, e.g. url = \"http://prometheus:9090\"")
    if not re.match(r"^https?://[^/\s]+", url):
        raise check.fail(table, "url", f"'{url}' is not an http:// or https:// URL")
    label = check.get(table, data, "host_label", str, None)
    if label is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", label):
        raise check.fail(table, "host_label", f"'{label}' is not a Prometheus label name")
    token_env = check.get(table, data, "token_env", str, None)
    if token_env is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", token_env):
        raise check.fail(table, "token_env", f"'{token_env}' is not an environment variable name (the token itself never goes in the file)")
    selector = check.get(table, data, "selector", str, None)
    if selector is not None and not re.match(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"[^"]*"(\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"[^"]*")*\s*$', selector):
        raise check.fail(table, "selector", f"'{selector}' is not a list of label matchers, e.g. cluster=\"prod\", job=~\"dcgm.*\"")
    matchers = r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"[^"]*"(\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"[^"]*")*\s*$'
    server = None
    for key in ("server_selector", "sglang_selector"):  # sglang_selector: its old name
        value = check.get(table, data, key, str, None)
        if value is not None and not re.match(matchers, value):
            raise check.fail(table, key, f"'{value}' is not a list of label matchers, e.g. job=\"sglang\"")
        if value is not None and server is not None:
            raise check.fail(table, key, "give server_selector (sglang_selector is its old name), not both")
        server = server if value is None else value
    return check.read_settings(table, data, PrometheusSettings, url=url.rstrip("/"), host_label=label, token_env=token_env,
                               selector=selector, server_selector=server, sglang_selector=None)


def _check_jump_cycles(check: Checker, hosts: tuple[HostConfig, ...]) -> None:
    by_name = {h.name: h for h in hosts}
    for host in hosts:
        seen = [host.name]
        current = host
        while current.jump_host and current.jump_host in by_name:
            nxt = by_name[current.jump_host]
            if nxt.local:
                raise check.fail(("hosts", current.name), "jump_host", f"'{nxt.name}' is a local host, not an SSH jump host")
            if nxt.name in seen:
                chain = " -> ".join(seen + [nxt.name])
                raise check.fail(("hosts", host.name), "jump_host", f"jump hosts form a loop: {chain}")
            seen.append(nxt.name)
            current = nxt


def local_only_config() -> Config:
    """What `cockpit` watches with no config at all: this machine."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname() or "localhost") or "localhost"
    return Config(path=None, hosts=(HostConfig(name=name, local=True, roles=("local",)),), implicit=True)


def load_config(path: str | Path | None) -> Config:
    """Load the config named on the command line, else the XDG default, else watch this machine only."""
    if path is None:
        default = default_config_path()
        if not default.exists():
            return local_only_config()
        path = default
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(path), "no such file") from None
    except IsADirectoryError:
        raise ConfigError(str(path), "is a directory, not a config file") from None
    except PermissionError:
        raise ConfigError(str(path), "permission denied") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(str(path), "is not UTF-8 text", line=line) from None
    return parse_config(text, str(path))


def local_username() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return "root"


def rewrite_step_list(path: Path, step: str, key: str, values: list[str], why: str) -> str | None:
    """Set one list of strings of a runbook step in the config file the user keeps (`extra_args` after a fix): the one
    line that holds it is replaced (the old one kept above it as a comment, with why), or the key added under the step's
    name.  The file is written whole only once the new text parses and says exactly that; the file's mode is kept.
    Returns None when written, else why it was not (the file is left as it was)."""
    import json
    import os
    import tomllib

    from cockpit.paths import atomic_write

    try:
        text = path.read_text(encoding="utf-8-sig")
        old = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"{path} could not be read again ({exc})"
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == "[[runbook.steps]]"]
    block = None
    for n, start in enumerate(starts):
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        if n + 1 < len(starts):
            end = min(end, starts[n + 1])
        for i in range(start + 1, end):
            try:
                if tomllib.loads(lines[i]).get("name") == step:
                    block = (start, end, i)
            except tomllib.TOMLDecodeError:
                continue
    if block is None:
        return f"{path} has no [[runbook.steps]] table named {step!r} written on one line: add {key} by hand"
    start, end, name_line = block
    new_line = f"{key} = {json.dumps(values)}\n"
    note = f"# {why}\n"
    at = next((i for i in range(start + 1, end) if lines[i].split("=", 1)[0].strip() == key), None)
    if at is None:
        lines[name_line + 1:name_line + 1] = [note, new_line]
    else:
        try:
            tomllib.loads(lines[at])
        except tomllib.TOMLDecodeError:
            return f"{path}: {step}'s {key} spans several lines: set it by hand to {json.dumps(values)}"
        lines[at:at + 1] = [note, "# was: " + lines[at].lstrip(), new_line]
    new_text = "".join(lines)
    try:
        parsed = tomllib.loads(new_text)
        steps = parsed["runbook"]["steps"]
        mine = next(s for s in steps if s.get("name") == step)
        others_same = [s for s in steps if s.get("name") != step] == [s for s in old["runbook"]["steps"] if s.get("name") != step]
    except (tomllib.TOMLDecodeError, KeyError, StopIteration, TypeError) as exc:
        return f"{path} would not read back after the change ({exc}): left as it was"
    if mine.get(key) != values or not others_same:
        return f"{path} would not read back as intended: left as it was"
    try:
        mode = os.stat(path).st_mode & 0o777
        atomic_write(path, new_text, mode=mode)
    except OSError as exc:
        return f"{path} could not be written ({exc.strerror or exc}): left as it was"
    return None
