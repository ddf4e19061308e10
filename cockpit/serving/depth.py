"""One meaning of depth everywhere: SGLang's own three numbers.

- steps (`--speculative-num-steps`): how many times the draft runs per verify; the DEPTH of a chain.
- topk (`--speculative-eagle-topk`): branches kept per step; 1 is a chain.
- draft tokens (`--speculative-num-draft-tokens`): tokens the target verifies per step; for a topk-1
  chain SGLang sets it to steps + 1 whatever is given.

"Depth N" is N steps of a topk-1 chain: N + 1 draft tokens.  vLLM's `num_speculative_tokens` N is the
same N steps.  A config is always shown with all three numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEPTH_FLAGS = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")


@dataclass(frozen=True, order=True)
class DepthConfig:
    """One speculative configuration, or none of the three for the baseline without speculation."""

    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None

    @classmethod
    def chain(cls, depth: int) -> "DepthConfig":
        """Depth N: a topk-1 chain of N steps, N + 1 draft tokens (vLLM's num_speculative_tokens N)."""
        return cls(steps=depth, topk=1, draft_tokens=depth + 1)

    @classmethod
    def of_draft_tokens(cls, draft_tokens: int) -> "DepthConfig":
        """A topk-1 chain given by SGLang's draft-token count: N draft tokens are N - 1 steps."""
        return cls.chain(max(1, draft_tokens - 1))

    @classmethod
    def from_json(cls, data: Any) -> "DepthConfig | None":
        if not isinstance(data, dict):
            return None
        values = [data.get(k) for k in ("steps", "topk", "draft_tokens")]
        if all(v is None for v in values):
            return cls()
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        return cls(*values)

    @classmethod
    def from_argv(cls, argv: list[str] | tuple[str, ...]) -> "DepthConfig | None":
        """The configuration a command line runs (None when it gives no depth flags at all)."""
        found: dict[str, int] = {}
        for index, word in enumerate(argv):
            name, _, inline = word.partition("=")
            if name in DEPTH_FLAGS:
                value = inline or (argv[index + 1] if index + 1 < len(argv) else "")
                if value.isdigit():
                    found[name] = int(value)
        if not found:
            return None if "--speculative-algorithm" in argv else cls()
        steps, topk, draft = (found.get(f) for f in DEPTH_FLAGS)
        if steps is not None and (topk or 1) == 1:
            return cls.chain(steps)  # SGLang rewrites draft tokens to steps + 1
        return cls(steps, topk, draft)

    def to_json(self) -> dict[str, int | None]:
        return {"steps": self.steps, "topk": self.topk, "draft_tokens": self.draft_tokens}

    @property
    def speculative(self) -> bool:
        return self.steps is not None

    @property
    def depth(self) -> int | None:
        return self.steps

    def args(self) -> list[str]:
        if not self.speculative:
            return []
        return ["--speculative-num-steps", str(self.steps), "--speculative-eagle-topk", str(self.topk),
                "--speculative-num-draft-tokens", str(self.draft_tokens)]

    @property
    def label(self) -> str:
        """'depth 16 (steps 16, topk 1, draft tokens 17)'; 'baseline' for no speculation."""
        if not self.speculative:
            return "baseline"
        head = f"depth {self.steps}" if self.topk == 1 else f"tree {self.steps}x{self.topk}"
        return f"{head} (steps {self.steps}, topk {self.topk}, draft tokens {self.draft_tokens})"

    @property
    def short(self) -> str:
        """For chart axes: 'base', 'd16', 't4x4/8'."""
        if not self.speculative:
            return "base"
        return f"d{self.steps}" if self.topk == 1 else f"t{self.steps}x{self.topk}/{self.draft_tokens}"

    def problem(self) -> str | None:
        """Why SGLang could not run this configuration as labelled (None: it can)."""
        if not self.speculative:
            return None
        if self.steps is None or self.topk is None or self.draft_tokens is None:
            return "give steps, topk and draft tokens together (SGLang fails on a partial set)"
        if self.steps < 1:
            return f"steps {self.steps}: a draft needs at least 1 step"
        if self.topk < 1:
            return f"topk {self.topk}: at least 1"
        if self.draft_tokens < 2:
            return f"draft tokens {self.draft_tokens}: at least 2 (the token the target verifies, plus one drafted)"
        if self.topk == 1 and self.draft_tokens != self.steps + 1:
            return (f"with topk 1, SGLang sets draft tokens to steps + 1 = {self.steps + 1}, not {self.draft_tokens}: "
                    f"the run would not be the configuration it is labelled")
        if self.topk > 1:
            if self.draft_tokens < self.steps + 1:
                return (f"topk {self.topk} with {self.draft_tokens} draft tokens cannot hold a path of {self.steps} steps: "
                        f"give at least steps + 1 = {self.steps + 1}")
            most = 1 + self.topk + (self.steps - 1) * self.topk * self.topk
            if self.draft_tokens > most:
                return f"a tree of {self.steps} steps x topk {self.topk} has at most {most} tokens, not {self.draft_tokens}"
        return None


def with_value(argv: list[str], flag: str, value: str) -> list[str]:
    """A command line with `flag`'s value replaced (`--flag V` or `--flag=V`), or the flag added with it."""
    out, index, found = [], 0, False
    while index < len(argv):
        word = argv[index]
        if word == flag and index + 1 < len(argv):
            out += [flag, value]
            index, found = index + 2, True
            continue
        out.append(f"{flag}={value}" if word.startswith(flag + "=") else word)
        found = found or word.startswith(flag + "=")
        index += 1
    return out if found else out + [flag, value]


def with_depth(argv: list[str], depth: DepthConfig, algorithm: str = "EAGLE3") -> list[str]:
    """A command line with its depth flags replaced by `depth` (every speculative flag gone for a baseline)."""
    out: list[str] = []
    skip = False
    for index, word in enumerate(argv):
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        drop = name in DEPTH_FLAGS or (not depth.speculative and name.startswith("--speculative-"))
        if drop:
            skip = "=" not in word and index + 1 < len(argv) and not argv[index + 1].startswith("--")
            continue
        out.append(word)
    if depth.speculative:
        if "--speculative-algorithm" not in out:
            out += ["--speculative-algorithm", algorithm]
        out += depth.args()
    return out
