"""SGLang's own flags as the cockpit ships them: the newest recorded `--help` (help texts for a schema read from a
usage text alone, and the flags a pasted error line is read against)."""

from __future__ import annotations

from cockpit.serving.helpschema import FlagSchema, parse_argparse_text

REFERENCE_HELP = "help_0.5.23.txt"  # the newest recorded `--help`, shipped in cockpit/sglang/data
_reference: FlagSchema | None = None


def reference_schema() -> FlagSchema:
    """The flags of the newest SGLang the cockpit ships a `--help` of (help texts for a usage-only schema)."""
    global _reference
    if _reference is None:
        from importlib import resources

        _reference = parse_argparse_text(resources.files("cockpit.sglang").joinpath("data", REFERENCE_HELP).read_text())
    return _reference
