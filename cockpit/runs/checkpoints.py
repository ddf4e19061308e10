"""Checkpoints in a training run's output dir, watched over the host's connection (runs-facts a.4).

A directory counts as a checkpoint by its name: `epoch_N`, `epoch_N_step_M` (SpecForge E1-E3),
`<run>-stepN` (E4), `*-latest` (E4's pointer; the step it names is listed on its own).  It is
*complete* only when every file is whole:
- a model dir: `config.json` parses and each `*.safetensors` is exactly 8 + header + the largest
  data end long (a save still being written is shorter), no `*.tmp` beside them;
- an E4 state dir: `training_state.pt` is there and no `*.tmp` (E4 saves atomically), and it holds no
  weights SGLang can load: it needs `specforge export --to sglang` first.
A complete model dir is inspected header-only (never the tensors) for its key layout and SGLang's
verdict by version (drafter/inspect.py).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field

from cockpit.drafter.header import HeaderError, header_length, parse_header_bytes
from cockpit.drafter.inspect import build_report, every, ranges_of
from cockpit.hosts.transport import FileStat, Transport

_EPOCH = re.compile(r"^epoch_(?P<epoch>\d+)(?:_step_(?P<step>\d+))?$")
_STEP = re.compile(r"^(?P<run>.+)-step(?P<step>\d+)$")
_LATEST = re.compile(r"^(?P<run>.+)-latest$")


@dataclass
class Checkpoint:
    path: str
    name: str
    order: tuple[int, int]  # (epoch, step) or (0, step): the later, the higher
    complete: bool
    why: str = ""  # what is missing, when not complete
    key_layout: str | None = None  # "midlayer.*", "layers.0.*", or None when it was not read
    layout: str = ""  # the trainer's layout in words (drafter/inspect.py)
    needs_export: bool = False  # E4 training state: export to SGLang's layout first
    ready: dict = field(default_factory=dict)  # SGLang version range -> loads as is?
    problems: list = field(default_factory=list)
    breaks: dict = field(default_factory=dict)  # version range -> the problems that break it (another range's are not its)
    mtime: float = 0.0
    files: int = 0

    def to_json(self) -> dict:
        return {"path": self.path, "name": self.name, "complete": self.complete, "why": self.why, "key_layout": self.key_layout,
                "layout": self.layout, "needs_export": self.needs_export, "ready": self.ready, "problems": self.problems,
                "breaks": self.breaks}

    def verdict(self, version: str | None, engine: str = "sglang") -> str:
        """Whether the engine that will serve it loads it as it is (`engine`'s loader, for `version`, else each of its
        version ranges)."""
        from cockpit.serving.engines import label

        name = label(engine)
        if not self.complete:
            return f"incomplete: {self.why}"
        if self.needs_export:
            return "training state only: `specforge export --to sglang` makes the servable dir"
        ranges = ranges_of(engine, version)
        if version:
            ok = all(self.ready.get(r) for r in ranges)
            why = [message for r in ranges for message in self.breaks.get(r, ())][:1]  # this range's, not another engine's
            return f"ready for {name} {version}" if ok else f"not ready for {name} {version}: " + "; ".join(why)
        ready = [r.removeprefix(name + " ") for r in ranges if self.ready.get(r)]  # vLLM's ranges carry its name
        return f"ready for {name} " + ", ".join(ready) if ready else f"not ready for any {name}"


def _order(name: str) -> tuple[int, int] | None:
    if (m := _EPOCH.match(name)):
        return int(m.group("epoch")), int(m.group("step") or 0)
    if (m := _STEP.match(name)):
        return 0, int(m.group("step"))
    return None


async def read_safetensors_header(transport: Transport, path: str, size: int):
    """The header of a safetensors file on the host (8 + N bytes); raises HeaderError, and Incomplete
    for a file shorter than its header says (a save still being written)."""
    head = await transport.read_range(path, 0, min(64, size))
    length = header_length(head, size, path)
    header_bytes = await transport.read_range(path, 8, length)
    try:
        raw = json.loads(header_bytes)
        end = max((t["data_offsets"][1] for k, t in raw.items() if k != "__metadata__"), default=0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        end = None  # not even a header: parse_header_bytes says what is wrong
    if end is not None and size < 8 + length + end:
        raise Incomplete(f"{posixpath.basename(path)} is {size} bytes of {8 + length + end}: still being written")
    return parse_header_bytes(head[:8], header_bytes, size, path)


class Incomplete(HeaderError):
    """A safetensors file shorter than its header says: a save still being written."""


async def inspect_checkpoint(transport: Transport, path: str, name: str, order: tuple[int, int]) -> Checkpoint:
    checkpoint = Checkpoint(path, name, order, complete=False)
    entries = await transport.list_dir(path) or []
    checkpoint.files = len(entries)
    checkpoint.mtime = max((e.mtime for e in entries), default=0.0)
    names = {e.name: e for e in entries}
    temps = [e.name for e in entries if e.name.endswith(".tmp")]
    if temps:
        checkpoint.why = f"{temps[0]} is still being written"
        return checkpoint
    weights = sorted(n for n in names if n.endswith(".safetensors"))
    if not weights:
        if "training_state.pt" in names:
            checkpoint.complete, checkpoint.needs_export = True, True
            checkpoint.layout = "SpecForge training state (midlayer.* inside training_state.pt; no safetensors)"
            return checkpoint
        if _STEP.match(name) or any(n.startswith("training_state") for n in names):
            # SpecForge E4 (`RUN-stepN/`): training state only, rank 0's written last and atomically
            checkpoint.needs_export = True
            ranks = [n for n in names if n.startswith("training_state_rank")]
            checkpoint.why = ("a save in progress: training_state.pt not there yet" + (f" ({len(ranks)} rank files are)" if ranks else "")
                              + "; this era's checkpoints hold no safetensors")
            return checkpoint
        checkpoint.why = "no model.safetensors yet" if "config.json" not in names else "config.json but no weights yet"
        return checkpoint
    if "config.json" not in names:
        checkpoint.why = "no config.json yet"
        return checkpoint
    config_text = (await transport.read_range(posixpath.join(path, "config.json"), 0, 1 << 20)).decode("utf-8", errors="replace")
    try:
        json.loads(config_text)
    except ValueError:
        checkpoint.why = "config.json does not parse yet (still being written?)"
        return checkpoint
    headers = []
    for weight in weights:
        entry: FileStat = names[weight]
        try:
            header = await read_safetensors_header(transport, posixpath.join(path, weight), entry.size)
        except HeaderError as exc:
            checkpoint.why = str(exc)
            return checkpoint
        end = max((t.end for t in header.tensors.values()), default=0)
        if entry.size != 8 + header.header_len + end:
            checkpoint.why = f"{weight} is {entry.size} bytes of {8 + header.header_len + end}: still being written"
            return checkpoint
        headers.append(header)
    report = build_report(path, headers, config_text, posixpath.join(path, "config.json"))
    tensor_names = set(report.tensors)
    checkpoint.complete = True
    checkpoint.key_layout = ("layers.0.*" if any(n.startswith("layers.0.") for n in tensor_names)
                             else "midlayer.*" if any(n.startswith("midlayer.") for n in tensor_names) else "unrecognised")
    checkpoint.layout = report.layout
    verdicts = report.verdicts(engine="both")
    checkpoint.ready = {r: not verdicts[r] for r in every()}  # every engine's version ranges
    checkpoint.problems = [p.message for p in report.problems]
    checkpoint.breaks = {r: [p.message for p in problems] for r, problems in verdicts.items() if problems}
    return checkpoint


async def scan(transport: Transport, output_dir: str, known: dict[str, Checkpoint] | None = None) -> list[Checkpoint]:
    """Every checkpoint dir under output_dir (and one level down: SpecForge puts runs in subdirs),
    oldest first.  `known` holds earlier results: a complete checkpoint whose files did not change
    is not read again."""
    known = known if known is not None else {}
    found: list[Checkpoint] = []
    entries = await transport.list_dir(output_dir)
    if entries is None:
        return found
    candidates = []
    for entry in entries:
        if not entry.is_dir or _LATEST.match(entry.name):
            continue
        order = _order(entry.name)
        path = posixpath.join(output_dir, entry.name)
        if order is not None:
            candidates.append((path, entry, order))
        elif entry.name not in ("runs", "cache", "swanlog", "wandb", "mlruns"):
            for sub in await transport.list_dir(path) or []:
                if sub.is_dir and (sub_order := _order(sub.name)) is not None:
                    candidates.append((posixpath.join(path, sub.name), sub, sub_order))
    for path, entry, order in candidates:
        previous = known.get(path)
        if previous is not None and previous.complete and previous.mtime >= entry.mtime:
            found.append(previous)
            continue
        checkpoint = await inspect_checkpoint(transport, path, entry.name, order)
        known[path] = checkpoint
        found.append(checkpoint)
    found.sort(key=lambda c: c.order)
    return found


def latest(checkpoints: list[Checkpoint]) -> Checkpoint | None:
    """The newest complete checkpoint (an incomplete newer one is being written: not yet usable)."""
    complete = [c for c in checkpoints if c.complete]
    return complete[-1] if complete else None
