"""`[runs.NAME]` tables: the training runs the cockpit watches.  Checked here, once, for every
command (`config check` rejects what `cockpit runs` or the TUI would)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cockpit.config import Checker, Config
from cockpit.where.placement import PLACEMENT_KEYS, Placement, parse_placement

RUN_KEYS = {"host", "log", "output_dir", "depth", "stall_after_min", "total_steps", "poll_s", "pid_file", "process"} | PLACEMENT_KEYS


@dataclass(frozen=True)
class RunSpec:
    name: str
    host: str
    log: str | None = None
    output_dir: str | None = None
    depth: int | None = None  # the serving chain's steps: the estimate is truncated there
    stall_after_s: float = 600.0
    total_steps: int | None = None  # for logs that never say it (SpecForge E4)
    versions: dict[str, str] = field(default_factory=dict)  # engine -> the serving host's version: its loader judges the checkpoints

    def judge(self) -> tuple[str | None, str]:
        """(the version, the engine) the checkpoints are judged for."""
        from cockpit.serving.engines import judged_by

        return judged_by(dict(self.versions))
    poll_s: float = 2.0  # the log and the process are looked at this often: a death is seen within it
    pid_file: str | None = None  # the trainer's pid, written by whoever started it (else: the log's writers)
    process: str | None = None  # a regular expression over its command line (else: the log's writers)
    placement: Placement | None = None  # a Slurm job, a container or a pod (where/): its manager is asked too

    def _versions_json(self) -> dict[str, str | None]:
        from cockpit.serving.engines import names

        return {name: self.versions.get(name) for name in names()}

    def to_json(self) -> dict:
        return {"name": self.name, "host": self.host, "log": self.log, "output_dir": self.output_dir, "depth": self.depth,
                "stall_after_s": self.stall_after_s, "total_steps": self.total_steps, **self._versions_json(),
                "pid_file": self.pid_file, "process": self.process,
                "where": self.placement.to_json() if self.placement else {"kind": "process"}}


def parse_runs(config: Config) -> dict[str, RunSpec]:
    raw = config.raw.get("runs", {})
    check = Checker(str(config.path or "<config>"), config.text)
    if not isinstance(raw, dict):
        raise check.fail((), "runs", "must be tables: [runs.NAME] with host and log and/or output_dir")
    hosts = {h.name for h in config.hosts}
    runs = {}
    for name, data in raw.items():
        table = ("runs", name)
        if not isinstance(data, dict):
            raise check.fail(("runs",), name, "each run must be a table: [runs.NAME]")
        from cockpit.serving.engines import names as engine_names

        check.unknown_keys(table, data, RUN_KEYS | set(engine_names()))
        host = check.get(table, data, "host", str, None)
        if host is None:
            raise check.fail(table, None, f"run '{name}' needs 'host' (one of: {', '.join(sorted(hosts)) or 'no hosts configured'})")
        if host not in hosts:
            raise check.fail(table, "host", f"no host named '{host}'; hosts: {', '.join(sorted(hosts)) or 'none'}")
        if not config.host(host).ssh_reachable:
            raise check.fail(table, "host", f"host '{host}' has no address (Prometheus only): a run's log is read over SSH")
        log = check.get(table, data, "log", str, None)
        output_dir = check.get(table, data, "output_dir", str, None)
        placement = parse_placement(check, table, data)
        if log is None and output_dir is None and placement is None:
            raise check.fail(table, None, f"run '{name}' needs 'log' (the trainer's console log) and/or 'output_dir' "
                             "(its checkpoints and runs/ TensorBoard events), or where it runs (slurm_job, container, pod: "
                             "its log is read from its manager)")
        for key, value in (("log", log), ("output_dir", output_dir)):
            if value is not None and not value.startswith("/"):
                raise check.fail(table, key, f"'{value}' must be an absolute path on {host} (it is read over SFTP: start it with /)")
        depth = check.get(table, data, "depth", int, None, minimum=1)
        from cockpit.serving.engines import engine, names

        versions: dict[str, str] = {}
        for word in names():  # `sglang = "0.5.2"`: the engine whose loader judges the checkpoints, and its version
            version = check.get(table, data, word, str, None)
            if version is None:
                continue
            if (problem := engine(word).version_problem(version)):
                raise check.fail(table, word, problem)
            if versions:
                raise check.fail(table, word, f"give one of {' or '.join(names())} (the engine whose loader judges the "
                                 "checkpoints), not both")
            versions[word] = version
        pid_file = check.get(table, data, "pid_file", str, None)
        if pid_file is not None and not pid_file.startswith("/"):
            raise check.fail(table, "pid_file", f"'{pid_file}' must be an absolute path on {host}")
        process = check.get(table, data, "process", str, None)
        if process is not None:
            try:
                re.compile(process)
            except re.error as exc:
                raise check.fail(table, "process", f"{process!r} is not a regular expression: {exc}") from None
        runs[name] = RunSpec(
            name=name, host=host, log=log, output_dir=output_dir, depth=depth,
            stall_after_s=60.0 * check.get(table, data, "stall_after_min", float, 10.0, minimum=0.1),
            total_steps=check.get(table, data, "total_steps", int, None, minimum=1),
            versions=versions,
            poll_s=check.get(table, data, "poll_s", float, 2.0, minimum=0.2),
            pid_file=pid_file, process=process or None, placement=placement,
        )
    return runs
