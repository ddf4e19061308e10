"""The composition root: the one place the cockpit's objects are built and its step kinds are
registered.  The CLI and the TUI are thin shells over a Context.

`check_config` is also the one validation every command uses: `config check` rejects exactly what
`plan run`, `bench sweep` and the TUI would (hosts and settings, each runbook step against its kind,
the [bench] sweep).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from cockpit import paths
from cockpit.alerts import AlertSettings, parse_alerts
from cockpit.bench.checkpoints import Candidate
from cockpit.bench.steps import BENCH_KINDS
from cockpit.bench.sweep import SweepSpec, parse_sweep
from cockpit.config import Config, load_config
from cockpit.errors import CockpitError
from cockpit.drafter.steps import DRAFTER_KINDS
from cockpit.runbook import spec as runbook_spec
from cockpit.runbook.builtin import BUILTIN_KINDS
from cockpit.runbook.engine import Runbook
from cockpit.runbook.kind import Kinds, registry
from cockpit.runbook.spec import RunbookSpec
from cockpit.runbook.store import StateStore
from cockpit.runs.spec import RunSpec, parse_runs
from cockpit.runs.steps import RUNS_KINDS
from cockpit.serving.steps import SERVING_KINDS
from cockpit.telemetry.hub import TelemetryHub
from cockpit.format import plural, shell_words


def default_kinds() -> Kinds:
    """Every step kind the cockpit ships: the runbook's own, the serving steps (every engine's), the drafter's, the
    benchmarks', the training runs'."""
    return registry((*BUILTIN_KINDS, *SERVING_KINDS, *DRAFTER_KINDS, *BENCH_KINDS, *RUNS_KINDS))


def parse_runbook(config: Config, kinds: Kinds | None = None) -> RunbookSpec:
    return runbook_spec.parse_runbook(config, kinds if kinds is not None else default_kinds())


@dataclass(frozen=True)
class CheckedConfig:
    config: Config
    runbook: RunbookSpec
    sweep: SweepSpec | None  # None: no [bench] table and no bench_sweep step
    runs: dict[str, RunSpec] = field(default_factory=dict)  # [runs.NAME]
    alerts: AlertSettings = field(default_factory=AlertSettings)

    def to_json(self) -> dict:
        sweep = self.sweep
        return {"hosts": [{"name": h.name, "local": h.local, "address": h.address, "user": h.user, "port": h.port,
                           "jump_host": h.jump_host, "roles": list(h.roles), "connect_timeout": h.connect_timeout}
                          for h in self.config.hosts],
                "runbook": {"name": self.runbook.name, "steps": [{"name": s.name, "kind": s.kind, "host": s.host,
                                                                  "hosts": list(self.runbook.kind(s).hosts(s))}
                                                                 for s in self.runbook.steps]},
                "runs": [r.to_json() for r in self.runs.values()],
                "sweep": None if sweep is None else {"launch_step": sweep.launch_step, "configs": [c.label for c in sweep.configs()],
                                                     "concurrency": list(sweep.concurrency)}}

    def launch_problems(self) -> list[str]:
        """What each launch step's engine would refuse in the line the step builds, judged offline by the engine's own
        recorded facts for the step's version (a flag it does not have, left in extra_args): the launch would fail."""
        from cockpit.serving.helpschema import load_schema
        from cockpit.serving.steps import ServeLaunch

        problems = []
        for spec in self.runbook.steps:
            kind = self.runbook.kind(spec)
            if not isinstance(kind, ServeLaunch):
                continue
            try:
                schema = load_schema(spec.params["help_text"]) if spec.params.get("help_text") else None
                report = kind.lint(kind.base_argv(None, spec), spec, schema)
            except (CockpitError, OSError, ValueError) as exc:
                problems.append(f"step '{spec.name}': its command line could not be checked offline ({exc})")
                continue
            for d in report.diagnoses:
                if d.severity == "error":
                    fix = f" (fix: {shell_words(d.replacement)})" if d.replacement else ""
                    problems.append(f"step '{spec.name}': {d.message}{fix}")
        return problems

    def render(self) -> str:
        lines = [f"{plural(len(self.config.hosts), 'host')}, {plural(len(self.runbook.steps), 'runbook step')}"]
        for host in self.config.hosts:
            roles = f" [{', '.join(host.roles)}]" if host.roles else ""
            lines.append(f"  {host.label}{f' via {host.jump_host}' if host.jump_host else ''}{roles}")
        lines += [f"  step {n}. {s.name}: {self.runbook.kind(s).title(s)}"
                  for n, s in enumerate(self.runbook.steps, start=1)]  # the step's words, never its kind's internal name
        lines += [f"  run {r.name} on {r.host}: " + ", ".join(x for x in (r.log, r.output_dir) if x) for r in self.runs.values()]
        if self.sweep is not None:
            lines.append(f"  sweep: relaunch '{self.sweep.launch_step}' for {', '.join(c.label for c in self.sweep.configs())}; "
                         f"concurrency {', '.join(map(str, self.sweep.concurrency))}")
        return "\n".join(lines)


def check_config(config: Config, kinds: Kinds | None = None) -> CheckedConfig:
    """Every part of a config checked; raises ConfigError naming file, line and key."""
    runs = parse_runs(config)  # before the runbook: its wait_run steps name these
    alerts = parse_alerts(config)
    runbook = parse_runbook(config, kinds)
    wants_sweep = "bench" in config.raw or any(s.kind == "bench_sweep" for s in runbook.steps)
    sweep = parse_sweep(config, runbook) if wants_sweep else None
    return CheckedConfig(config, runbook, sweep, runs, alerts)


def load_checked(path: str | Path | None, kinds: Kinds | None = None) -> CheckedConfig:
    return check_config(load_config(path), kinds)


class Context:
    """Built once from a checked config: the command log, the transport pool and telemetry hub
    (the hub owns both), the runbook with its kinds (it watches the hub itself; built when first
    used, so `status` never reads runbook state), the sweep."""

    def __init__(self, checked: CheckedConfig, hub: TelemetryHub | None = None, runbook: Runbook | None = None,
                 store: StateStore | None = None, hosts: list[str] | None = None):
        self.checked = checked
        self.config = checked.config
        paths.use_storage(self.config.storage_dir)  # one state per config, whichever shell reads it
        watched = self.config if not hosts else replace(self.config, hosts=tuple(self.config.host(n) for n in hosts))
        self.hub = hub or TelemetryHub(watched)
        self.pool = self.hub.pool
        self.log = self.hub.log
        self.kinds = checked.runbook.kinds
        self.sweep = checked.sweep
        self.runs = checked.runs
        self.alerts = checked.alerts
        self._runbook = runbook
        self._actions: Runbook | None = None
        self._store = store

    @classmethod
    def load(cls, path: str | Path | None, kinds: Kinds | None = None, hosts: list[str] | None = None) -> "Context":
        return cls(load_checked(path, kinds), hosts=hosts)

    @classmethod
    def of(cls, config: Config, hub: TelemetryHub | None = None, runbook: Runbook | None = None,
           kinds: Kinds | None = None) -> "Context":
        return cls(check_config(config, kinds), hub, runbook)

    @property
    def runbook(self) -> Runbook | None:
        """The runbook of the config (None when it has no steps)."""
        if self._runbook is None and self.checked.runbook.steps:
            self._runbook = Runbook(self.checked.runbook, self.hub, self._store)
        return self._runbook

    @property
    def own_kills(self):
        """(host) -> the cockpit's own kills there, from this config's audit log, read without loading the runbook's state
        (a viewer that may not read it still watches its runs: the answer is then empty)."""
        built = self._runbook or self._actions
        if built is not None:
            return built.store.kills
        if self._store is None:
            self._store = StateStore(self.checked.runbook.id)  # kept: its kills() reads on from where it stopped
        return self._store.kills

    @property
    def actions(self) -> Runbook:
        """What runs a one-off action (the process table's kill) with the runbook's plan, confirmation and audit log:
        the runbook, or one with no steps for a config that has none."""
        if self.runbook is not None:
            return self.runbook
        if self._actions is None:
            self._actions = Runbook(self.checked.runbook, self.hub, self._store)
        return self._actions

    def sweep_spec(self) -> SweepSpec:
        """The [bench] sweep (its defaults when the config has none): raises ConfigError without a launch step."""
        return self.sweep if self.sweep is not None else parse_sweep(self.config, self.checked.runbook)

    def launch_step_for(self, name: str | None) -> str:
        """The launch step a measurement serves through: `name`, else the [bench] sweep's, else the runbook's only one."""
        from cockpit.serving.steps import is_launch

        runbook = self.runbook
        if runbook is None:
            raise CockpitError(f"{self.config.path} has no runbook: a launch step ([[runbook.steps]] kind serve_launch) serves what is measured")
        launches = [s.name for s in runbook.spec.steps if is_launch(s.kind)]
        if name is not None:
            if name not in launches:
                raise CockpitError(f"--step {name}: not a launch step of the runbook; launch steps: {', '.join(launches) or 'none'}")
            return name
        if self.sweep is not None:
            return self.sweep.launch_step
        if len(launches) == 1:
            return launches[0]
        raise CockpitError("the runbook has " + (f"{len(launches)} launch steps ({', '.join(launches)}): name one with --step"
                                                 if launches else "no launch step (kind serve_launch) to serve what is measured"))

    async def checkpoint_candidates(self, run: str, launch_step: str) -> list[Candidate]:
        """Every complete checkpoint of training run `run`, from one look at it, each judged for the engine and release
        the launch step serves with (bench/checkpoints.py Candidate: one it cannot load as it is says why)."""
        from cockpit.runs.watch import RunWatcher
        from cockpit.serving.steps import ServeLaunch

        if run not in self.runs:
            raise CockpitError(f"no run named '{run}'; runs: {', '.join(sorted(self.runs)) or 'none ([runs.NAME] in the config)'}")
        spec = self.runs[run]
        if not spec.output_dir:
            raise CockpitError(f"run '{run}' has no output_dir: its checkpoints are not known")
        request = ServeLaunch.request(self.actions.spec.step(launch_step))
        watcher = RunWatcher(spec, self.pool.get(spec.host), own_kills=self.own_kills)
        try:
            await watcher.poll()
        finally:
            await watcher.close()
        found = []
        for checkpoint in watcher.complete_checkpoints():
            verdict = checkpoint.verdict(request.param("version"), request.engine)
            found.append(Candidate(checkpoint.name, checkpoint.path, checkpoint.mtime, None if verdict.startswith("ready") else verdict))
        return found

    async def close(self) -> None:
        if self._runbook is not None:
            self._runbook.close()
        await self.hub.stop()
