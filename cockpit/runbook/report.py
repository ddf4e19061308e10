"""The runbook as text for `cockpit plan show`."""

from __future__ import annotations

from cockpit.format import age

MARKS = {"passed": "[x]", "failed": "[!]", "running": "[~]", "blocked": "[ ]", "pending": "[ ]", "stale": "[?]"}


def render_plan_text(runbook) -> str:
    lines = [f"runbook {runbook.spec.name} (state: {runbook.store.path})"]
    for number, view in enumerate(runbook.views(), start=1):
        lock = " LOCKED" if view.locked else ""
        lines.append(f"{MARKS[view.state.value]} {number}. {view.spec.name} on {view.spec.host}: {view.state.value}{lock}  - {view.title}")
        lines.append(f"      {view.why}")
        for warning in view.warnings:
            lines.append(f"      warning: {warning}")
        if view.result is not None:
            when = age(view.result.finished_at or view.result.started_at, long=True)
            lines.append(f"      {view.result.message}" + (f" ({when})" if when else ""))
            if view.result.forced_reason:
                lines.append(f"      gate skipped on purpose: {view.result.forced_reason}")
    return "\n".join(lines)
