"""One benchmark against a running server, as `cockpit bench run` does it: the endpoint taken as
the user wrote it, probed once (nothing measured or stored when nobody answers), the closed loop,
the summary and the stored run record."""

from __future__ import annotations

import time
from typing import Any

from cockpit.bench import store
from cockpit.bench.client import Workload, probe_endpoint, run_closed_loop
from cockpit.hosts.http import normalize_endpoint
from cockpit.bench.stats import summarize
from cockpit.errors import CockpitError


def endpoint_url(text: str) -> str:
    try:
        return normalize_endpoint(text)
    except ValueError as exc:
        raise CockpitError(f"--endpoint {exc}") from None


def run_record(summary: dict[str, Any], *, label: str | None, endpoint: str, api: str, workload: Workload) -> dict[str, Any]:
    """The summary of a run with what it was measured against: the record `bench report` reads."""
    return {**summary, "label": label or f"{api}-c{workload.concurrency}", "endpoint": endpoint, "api": api,
            "concurrency": workload.concurrency, "max_tokens": workload.max_tokens, "temperature": workload.temperature,
            "speculative": summary["accept_length"] is not None, "time": time.time()}


async def benchmark(endpoint: str, api: str, workload: Workload, label: str | None = None, save: bool = True,
                    progress=None) -> dict[str, Any]:
    """Probe, run, summarise, and store (unless save is False).  Raises CockpitError before
    measuring anything when the endpoint is wrong or nothing answers there."""
    endpoint = endpoint_url(endpoint)
    await probe_endpoint(endpoint)
    try:
        records, start, end = await run_closed_loop(endpoint, api, workload, progress=progress)
    except ValueError as exc:
        raise CockpitError(str(exc)) from None
    record = run_record(summarize(records, start, end), label=label, endpoint=endpoint, api=api, workload=workload)
    if save:
        record["file"] = str(store.save_run(record, [r.to_json() for r in records]))
    return record


def exit_code(record: dict[str, Any]) -> int:
    """0 every request answered, 1 some failed, 2 all failed (the server could not be used)."""
    if record["requests"] and record["failed"] == record["requests"]:
        return 2
    return 1 if record["failed"] else 0
