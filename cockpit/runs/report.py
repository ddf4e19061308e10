"""A run's status as text (the CLI's `cockpit runs`; the TUI draws its own pane from the same status)."""

from __future__ import annotations

from cockpit.format import duration
from cockpit.runs.watch import RunStatus, flag_lines


def eta_text(status: RunStatus) -> str:
    """'about 4 min left (3-5 min)': only for a running run, with the spread of its rates."""
    if status.eta_s is None or status.state != "running":
        return ""
    text = f"about {duration(status.eta_s)} left" + (" in this epoch" if status.eta_scope == "epoch" else "")
    if status.eta_range and duration(status.eta_range[0]) != duration(status.eta_range[1]):
        text += f" ({duration(status.eta_range[0])} to {duration(status.eta_range[1])})"
    return text


def progress_text(status: RunStatus) -> str:
    if status.step is None:
        return "no progress seen yet"
    text = f"step {status.step}" + (f"/{status.total} ({100 * status.step / status.total:.0f}%)" if status.total else "")
    if (eta := eta_text(status)):
        text += ", " + eta
    return text


def estimate_text(status: RunStatus) -> str | None:
    e = status.estimate
    if not e:
        return None
    return (f"estimated acceptance length {e['with_bonus']:.2f} with the bonus token, {e['without_bonus']:.2f} without "
            f"(greedy topk-1 chain, depth {e['depth']}, from {e['source']} accuracy)")


def where_text(status: RunStatus) -> str:
    """Where a run lives, when a manager runs it: 'Slurm job 123 on vm', 'docker container eagle3', 'pod ml/eagle3-0 on gpu-node-7'."""
    where = status.where
    if not where:
        return ""
    manager = where.get("manager") or {}
    node = manager.get("node")
    return where["label"] + (f" on {node}" if node and node != status.host else "")


def render_run(status: RunStatus) -> str:
    where = where_text(status)
    lines = [f"{status.name} on {status.host}" + (f" ({where})" if where else "") + f": {status.state.upper()}"
             + (f" ({status.phase})" if status.phase and status.state == "running" else "") + f"  {progress_text(status)}"]
    if status.evidence:
        lines.append(f"  why: {status.evidence}")
    figures = []
    if status.loss is not None:
        figures.append(f"loss {status.loss:.3g}")
    if status.acc is not None:
        figures.append(f"acc {status.acc:.3g}")
    if status.eval_loss is not None:
        figures.append(f"eval loss {status.eval_loss:.3g}")
    if figures:
        lines.append("  " + ", ".join(figures))
    if status.per_position_acc:
        lines.append(f"  per-position accuracy ({status.per_position_source}, {status.per_position_when}): "
                     + " ".join(f"{a:.2f}" for a in status.per_position_acc))
    if (text := estimate_text(status)):
        lines.append("  " + text)
    if status.finished:
        lines.append(f"  finished: {status.finished}")
    ship = shown_choice(status)
    if ship:
        lines.append("  by checkpoint: " + "  ".join(checkpoint_figure(r) for r in ship["rows"]) + f"; {ship['words']}")
    checkpoint = status.latest_checkpoint
    if checkpoint:
        lines.append(f"  latest checkpoint: {checkpoint['path']}: {checkpoint.get('key_layout') or '-'}; {checkpoint.get('verdict', '')}")
    elif status.watches_checkpoints:
        lines.append("  no checkpoint yet")
    lines += [f"  ! {line}" for line in flag_lines(status.flags) if not line.startswith(("died: ", "stalled: "))]
    lines += [f"  note: {note}" for note in status.notes]
    if status.read_error:
        lines.append(f"  could not read: {status.read_error}")
    return "\n".join(lines)


def shown_choice(status: RunStatus) -> dict | None:
    """Which checkpoint to ship, where it is worth a line: there is a choice, or what was measured stands behind it."""
    ship = status.per_checkpoint
    return ship if ship and (len(ship["rows"]) > 1 or ship.get("basis") == "measured") else None


def checkpoint_figure(row: dict) -> str:
    """A checkpoint's acceptance length: measured by serving (the estimate beside it), else estimated from accuracy."""
    if row.get("measured") is not None:
        if row.get("estimate_at_measured") is not None:  # at the depth it was served with
            return f"{row['checkpoint']} {row['measured']:.2f} (est. {row['estimate_at_measured']:.2f} at depth {row['estimate_depth']})"
        return f"{row['checkpoint']} {row['measured']:.2f}" + (f" (est. {row['estimate']:.2f})" if row.get("estimate") is not None else "")
    return f"{row['checkpoint']} est. {row['estimate']:.2f}"


def exit_code(statuses: list[RunStatus]) -> int:
    """0 healthy, 1 something flagged (or a run ended without evidence that it finished), 2 a run could not be read
    or whether its trainer lives could not be told."""
    if any(s.read_error for s in statuses) or any(s.state == "unknown" for s in statuses):
        return 2
    return 1 if any(s.flagged or s.state in ("ended", "cancelled") for s in statuses) else 0  # lifecycle.py says which
