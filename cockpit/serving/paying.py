"""Is speculation paying at this load?  (issue 51 item 1.)  The server's live figures (its throughput, its running
requests, its acceptance over the last window) against a baseline measured without speculation at the nearest
concurrency (the last sweep's `baseline` rows), said plainly:

- paying: xR the baseline at c=N (R >= 1 + MARGIN);
- not paying at this load: xR at c=N, with the concurrency above which the sweep found speculation should be off;
- inactive: a draft is loaded but no speculative step is counted while requests run (acceptance figures absent or not
  moving);
- collapsed: acceptance at or near 1.0 over the window under load (the draft proposes, nothing is accepted);
- idle: no request runs (nothing to judge); unknown: no baseline near this load (run the sweep), or no figures.

A verdict rests on figures read now and says which; a figure older than the server's own cadence is not judged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MARGIN = 0.05  # within 5 % of the baseline: neither paying nor not (noise of a live window)
COLLAPSED_AT = 1.05  # an acceptance length this close to 1 accepts (almost) no drafted token
NEAR = 2.0  # a baseline measured at a concurrency within a factor of 2 of the current one is comparable


@dataclass(frozen=True)
class Baseline:
    """Throughput without speculation by concurrency (the sweep's `baseline` rows), and where the sweep found speculation
    should be off (the lowest concurrency at which the baseline beat every speculative configuration; None: nowhere)."""

    tok_s: dict[int, float] = field(default_factory=dict)
    off_above: int | None = None
    source: str = ""  # where it was measured ("the sweep of 2026-12-07 11:02")
    sources: dict[int, str] = field(default_factory=dict)  # a concurrency measured elsewhere (a baseline on request)

    def source_at(self, concurrency: int) -> str:
        return self.sources.get(concurrency) or self.source

    def near(self, concurrency: int) -> tuple[int, float] | None:
        if not self.tok_s or concurrency <= 0:
            return None
        best = min(self.tok_s, key=lambda c: (abs(c - concurrency) / max(c, concurrency), c))
        if max(best, concurrency) / min(best, concurrency) > NEAR:
            return None
        return best, self.tok_s[best]


@dataclass(frozen=True)
class Verdict:
    state: str  # paying, not_paying, inactive, collapsed, idle, unknown
    words: str
    ratio: float | None = None
    concurrency: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "words": self.words, "ratio": self.ratio, "concurrency": self.concurrency}


def judge(figures: dict[str, Any], speculative: bool, baseline: Baseline | None) -> Verdict | None:
    """The verdict for a server's live figures (LiveFigures.to_json()); None where speculation is not configured."""
    if not speculative:
        return None
    if (figures.get("activity") or {}).get("state") not in ("serving",) or figures.get("figures_are_last"):
        state = (figures.get("activity") or {}).get("state") or "unknown"
        return Verdict("idle", f"not judged: the server is {state} (no request running now)")
    running = figures.get("running")
    tok_s = figures.get("throughput_tok_s")
    accept = figures.get("accept_length") or {}
    window = accept.get("counters") if accept.get("counters") is not None else accept.get("window")
    if not running:
        return Verdict("idle", "not judged: no request running now")
    if window is None:
        return Verdict("inactive", f"a draft is configured but no speculative step is counted while {running} requests run "
                                   "(no acceptance figure: speculation may be off, or the draft not loaded)", concurrency=running)
    if window <= COLLAPSED_AT:
        return Verdict("collapsed", f"acceptance {window:.2f} over the last window at c={running}: the draft's tokens are "
                                    "(almost) never accepted (layers.0.* keys skipped? a draft for another target?)",
                       concurrency=running)
    near = baseline.near(running) if baseline is not None else None
    if near is None or not tok_s:
        where = f" ({baseline.source})" if baseline is not None and baseline.source else ""
        return Verdict("unknown", f"acceptance {window:.2f} at c={running}; no baseline without speculation near this load{where} "
                                  f"(a sweep, or `cockpit bench baseline --concurrency {running}`)", concurrency=running)
    at, base = near
    ratio = tok_s / base
    source = baseline.source_at(at) if baseline is not None else ""
    measured = f"{tok_s:.0f} tok/s against {base:.0f} without speculation at c={at}" + (f" ({source})" if source else "")
    if ratio >= 1 + MARGIN:
        return Verdict("paying", f"paying: x{ratio:.2f} at c={running} ({measured}; acceptance {window:.2f})", round(ratio, 3), running)
    if ratio <= 1 - MARGIN:
        off = f"; the sweep found speculation should be off above c={baseline.off_above}" if baseline and baseline.off_above else ""
        return Verdict("not_paying", f"not paying at this load: x{ratio:.2f} at c={running} ({measured}){off}", round(ratio, 3), running)
    return Verdict("even", f"even: x{ratio:.2f} at c={running}, within {MARGIN:.0%} of the baseline ({measured})", round(ratio, 3),
                   running)


def baseline_of(rows: list[dict[str, Any]], decisions: list[dict[str, Any]] | None = None, source: str = "") -> Baseline | None:
    """A sweep's result (its decision rows: config, concurrency, throughput_median; its decisions per concurrency) as the
    baseline a verdict compares against; None without baseline rows."""
    tok_s = {int(r["concurrency"]): float(r["throughput_median"]) for r in rows
             if r.get("config") == "baseline" and r.get("concurrency") and r.get("throughput_median")}
    if not tok_s:
        return None
    off = sorted(int(d["concurrency"]) for d in decisions or () if d.get("speculation_off") or d.get("best") == "baseline")
    return Baseline(tok_s, off[0] if off else None, source)


JUDGED = ("paying", "not_paying", "even", "inactive", "collapsed")  # a verdict on a load (idle, unknown: none to judge)


@dataclass
class VerdictTurns:
    """When the verdict turns, in two looks (one window's figures are no evidence of a change): the judged state held,
    and the alert to send when a different judged state is seen twice in a row.  idle and unknown change nothing."""

    held: str | None = None
    _candidate: tuple[str, int] | None = None

    def see(self, verdict: Verdict | None) -> Verdict | None:
        """The verdict to alert on, once it has turned (None otherwise; the first judged state is no turn)."""
        if verdict is None or verdict.state not in JUDGED:
            return None
        if verdict.state == self.held:
            self._candidate = None
            return None
        count = self._candidate[1] + 1 if self._candidate and self._candidate[0] == verdict.state else 1
        self._candidate = (verdict.state, count)
        if count < 2:
            return None
        first, self.held, self._candidate = self.held is None, verdict.state, None
        return None if first else verdict


def verdict_alert(step: str, verdict: Verdict):
    """The alert a turned verdict sends ([alerts]): one key per step, so a new turn replaces the last."""
    from cockpit.alerts import Alert

    level = "info" if verdict.state == "paying" else "warning" if verdict.state in ("not_paying", "even") else "error"
    return Alert("speculation", f"speculation:{step}", f"{step}: speculation {verdict.state.replace('_', ' ')}", verdict.words, level)
