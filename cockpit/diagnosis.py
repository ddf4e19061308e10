"""A named problem with its fix, as every engine's lint and log diagnosis gives it (sglang/, vllm/)."""

from __future__ import annotations

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
