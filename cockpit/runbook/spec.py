"""The runbook section of the config: `[runbook]` and its ordered `[[runbook.steps]]`."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from cockpit.config import Config, did_you_mean, locate
from cockpit.errors import CockpitError, ConfigError
from cockpit.runbook.kind import Kinds, StepKind
from cockpit.runbook.model import StepSpec

STEP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*runbook\s*\.\s*steps\s*\]\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


@dataclass(frozen=True)
class RunbookSpec:
    id: str
    name: str
    steps: tuple[StepSpec, ...]
    freshness_s: float = 30.0
    kinds: Kinds = field(default_factory=dict, compare=False, repr=False)  # the kinds its steps were checked against

    def kind(self, spec: StepSpec) -> StepKind:
        return self.kinds[spec.kind]

    def step(self, name: str) -> StepSpec:
        for step in self.steps:
            if step.name == name:
                return step
        extra = did_you_mean(name, [s.name for s in self.steps])
        raise CockpitError(f"no step named '{name}'{extra}; steps: {', '.join(s.name for s in self.steps) or 'none'}")


def _step_line(text: str, index: int, key: str | None) -> int | None:
    """Line of the index-th [[runbook.steps]] header, or of `key` inside it."""
    seen = -1
    for number, line in enumerate(text.splitlines(), start=1):
        if _ARRAY_HEADER.match(line):
            seen += 1
            if seen == index and key is None:
                return number
            continue
        if seen == index and key is not None:
            if line.lstrip().startswith("["):
                return None
            match = _KEY.match(line)
            if match and match.group(1) == key:
                return number
    return None


def parse_runbook(config: Config, kinds: Kinds) -> RunbookSpec:
    """The [runbook] of a config, each step checked against its kind (`kinds`: every kind the
    composition root registered)."""
    path = str(config.path) if config.path else "<config>"
    raw = config.raw.get("runbook", {})
    text = config.text

    def fail(message: str, index: int | None = None, key: str | None = None) -> ConfigError:
        line = _step_line(text, index, key) if index is not None else None
        if line is None and index is not None and key is not None:
            line = _step_line(text, index, None)
        return ConfigError(path, message, line=line, key=key)

    def fail_table(message: str, key: str | None) -> ConfigError:
        return ConfigError(path, message, line=locate(text, ("runbook",), key), key=key)

    if not isinstance(raw, dict):
        raise ConfigError(path, "[runbook] must be a table", key="runbook")
    allowed = {"name", "freshness_s", "steps"}
    for key in raw:
        if key not in allowed:
            hint = did_you_mean(key, allowed)
            raise fail_table(f"unknown key in [runbook]{hint}; allowed: {', '.join(sorted(allowed))}", key)
    name = raw.get("name") or (config.path.stem if config.path else "default")
    if not isinstance(name, str):
        raise fail_table("runbook name must be a string", "name")
    freshness = raw.get("freshness_s", 30.0)
    if isinstance(freshness, bool) or not isinstance(freshness, (int, float)) or freshness <= 0:
        raise fail_table("freshness_s must be a positive number of seconds", "freshness_s")
    steps_raw = raw.get("steps", [])
    if not isinstance(steps_raw, list):
        raise fail_table("steps must be written as [[runbook.steps]] tables", "steps")
    hosts = {h.name for h in config.hosts}
    steps: list[StepSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(steps_raw):
        if not isinstance(item, dict):
            raise fail("each step must be a table", index)
        if "host" not in item and isinstance(item.get("hosts"), list) and item["hosts"] and isinstance(item["hosts"][0], str):
            item = {**item, "host": item["hosts"][0]}  # a group: the first host is rank 0 (checked below)
        elif "host" in item and "hosts" in item:
            raise fail("give 'host' (one host) or 'hosts' (a group, rank 0 first), not both", index, "hosts")
        for required in ("name", "kind", "host"):
            if required not in item:
                raise fail(f"step {index + 1} needs '{required}'" + (" (or 'hosts' for a group)" if required == "host" else ""), index)
            if not isinstance(item[required], str) or not item[required]:
                raise fail(f"'{required}' must be a non-empty string", index, required)
        step_name, kind_name, host = item["name"], item["kind"], item["host"]
        if not STEP_NAME_RE.match(step_name):
            raise fail(f"step name '{step_name}' may hold only letters, digits, '.', '_' and '-'", index, "name")
        if step_name in seen:
            raise fail(f"two steps are named '{step_name}'", index, "name")
        seen.add(step_name)
        kind = kinds.get(kind_name)
        if kind is None:
            extra = did_you_mean(kind_name, kinds)
            raise fail(f"unknown step kind '{kind_name}'{extra}; kinds: {', '.join(sorted(kinds))}", index, "kind")
        if host not in hosts:
            extra = did_you_mean(host, hosts)
            raise fail(f"no host named '{host}'{extra}", index, "host")
        for member in ([host] + [h for h in item.get("hosts") or [] if isinstance(h, str) and h in hosts]):
            if not config.host(member).ssh_reachable:
                raise fail(f"host '{member}' has no address: it is read through Prometheus only, and a step acts on the host "
                           "(processes, files, commands); give it an address to reach it by SSH", index, "hosts" if "hosts" in item else "host")
        if "hosts" in item:
            group = item["hosts"]
            if "hosts" not in kind.params:
                raise fail(f"'{kind_name}' steps run on one host: give 'host'", index, "hosts")
            if not isinstance(group, list) or not group or not all(isinstance(h, str) and h for h in group):
                raise fail("'hosts' must be a non-empty list of host names (rank 0 first)", index, "hosts")
            twice = sorted({h for h in group if group.count(h) > 1})
            if twice:
                raise fail(f"'{twice[0]}' is in the group twice: each node is one host", index, "hosts")
            for member in group:
                if member not in hosts:
                    extra = did_you_mean(member, hosts)
                    raise fail(f"no host named '{member}'{extra}", index, "hosts")
        params = {}
        for key, value in item.items():
            if key in ("name", "kind", "host", "title"):
                continue
            param = kind.params.get(key)
            if param is None:
                extra = did_you_mean(key, kind.params)
                raise fail(f"'{kind_name}' steps take no '{key}'{extra}; they take: {', '.join(sorted(kind.params))}", index, key)
            types = param.kind if isinstance(param.kind, tuple) else (param.kind,)
            if isinstance(value, bool) and bool not in types or not isinstance(value, types):
                names = " or ".join(t.__name__ for t in types)
                raise fail(f"'{key}' must be {names}, got {type(value).__name__} {value!r}", index, key)
            params[key] = value
        for key, param in kind.params.items():
            if param.required and key not in params:
                raise fail(f"'{kind_name}' step '{step_name}' needs '{key}' ({param.help})", index)
            if key not in params and param.default is not None:
                params[key] = param.default
        title = item.get("title")
        spec = StepSpec(step_name, kind_name, host, params, title if isinstance(title, str) else None)
        problem = kind.validate(spec)
        if problem:
            raise fail(problem, index)
        refused = kind.check_references(spec, tuple(steps), config)
        if refused:
            raise fail(refused[1], index, refused[0])
        steps.append(spec)
    digest = hashlib.sha1(str(config.path.resolve() if config.path else "<config>").encode()).hexdigest()[:8]
    return RunbookSpec(id=f"{name}-{digest}", name=name, steps=tuple(steps), freshness_s=float(freshness), kinds=kinds)
