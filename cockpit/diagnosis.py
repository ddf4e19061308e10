"""A named problem with its fix, as every engine's lint and log diagnosis gives it (sglang/, vllm/)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnosis:
    kind: str
    message: str
    flag: str | None = None
    value: str | None = None
    suggestions: tuple[str, ...] = ()
    line: int | None = None  # 1-based line in the file (or in the text given)
    replacement: tuple[str, ...] | None = None  # argv words replacing flag+value: the fix to apply
    severity: str = "error"

    def to_json(self) -> dict:
        return {"kind": self.kind, "flag": self.flag, "value": self.value, "suggestions": list(self.suggestions),
                "message": self.message, "line": self.line, "replacement": list(self.replacement) if self.replacement else None,
                "severity": self.severity}

    @classmethod
    def from_json(cls, data: dict) -> "Diagnosis | None":
        """A diagnosis read back from a step's evidence; None for a record of another shape."""
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or not isinstance(data.get("message"), str):
            return None

        def text(key):
            value = data.get(key)
            return value if isinstance(value, str) else None

        def words(key):
            value = data.get(key)
            return tuple(str(v) for v in value) if isinstance(value, list) else None

        line = data.get("line")
        return cls(data["kind"], data["message"], text("flag"), text("value"), words("suggestions") or (),
                   line if isinstance(line, int) and not isinstance(line, bool) else None, words("replacement"),
                   text("severity") or "error")

    @classmethod
    def all_from_json(cls, items) -> list["Diagnosis"]:
        return [d for d in (cls.from_json(i) for i in (items if isinstance(items, list) else [])) if d is not None]


# torch's own words when a layer is given a tensor of another width (both engines, every release): in a draft's forward
# pass it means a draft made for another target (real SGLang 0.5.11 and vLLM 0.26.0 starting a draft of hidden size 128
# for a target of 256: tests/fixtures/gpu-engines/*/E-serve.log).  SGLang wraps it in "Capture cuda graph failed" and
# suggests memory settings; vLLM in "Engine core initialization failed": neither would ever fix it.
SHAPE_MISMATCH = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((?P<rows>\d+)x(?P<given>\d+) and "
                            r"(?P<takes>\d+)x(?P<out>\d+)\)")
_DRAFT_FRAME = re.compile(r'File "[^"]*(?:eagle|draft)[^"/]*", line \d+', re.IGNORECASE)  # a frame of a draft's code


def in_draft(lines: list[str], index: int, reach: int = 120) -> bool:
    """Whether the traceback that ends at `index` runs through a draft's code (a file of an EAGLE worker or draft model:
    SGLang's eagle_draft_cuda_graph_runner.py, vLLM's llama_eagle3.py)."""
    return any(_DRAFT_FRAME.search(line) for line in lines[max(0, index - reach):index + 1])


def draft_does_not_fit(match: re.Match, line: int | None, draft: str | None = None, target: str | None = None) -> Diagnosis:
    """A draft whose layer shapes do not fit the target it was started with: no flag fixes that, only another draft (or
    the right target); the check that says which numbers differ is `cockpit drafter inspect DRAFT --target TARGET`."""
    takes, given = int(match.group("takes")), int(match.group("given"))
    joined = (f" (3 x {takes // 3}: an EAGLE-3 draft's first layer joins three hidden states of the target it was made for, "
              f"of size {takes // 3})") if takes % 3 == 0 else ""
    check = f"cockpit drafter inspect {draft or 'DRAFT'} --target {target or 'TARGET'}"
    return Diagnosis("draft_does_not_fit",
                     f"the draft does not fit this target: torch could not multiply {match.group('rows')}x{given} by "
                     f"{takes}x{match.group('out')} in the draft's forward pass: its layer takes {takes} inputs{joined} and "
                     f"was given {given}; no memory or graph setting changes that: serve the draft made for this target "
                     f"(check: {check})", None, None, (check,), line)
