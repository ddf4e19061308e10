"""The serving steps, for every engine: `serve_launch` (build the engine's command line, lint it against the
host's own engine, start it detached, gated on fresh clean-GPU evidence) and `serve_ready` (wait for /health
200, or diagnose the crash).  Their old names `sglang_launch` and `sglang_ready` are aliases: runbooks written
with them load unchanged.  What differs per engine is asked of it (serving/engines.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cockpit.format import plural, shell_words
from cockpit.hosts.procs import LaunchedProcess
from cockpit.hosts.transport import quote_argv
from cockpit.runbook.builtin import Launch
from cockpit.runbook.kind import Param, RunContext, StepKind
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState
from cockpit.serving import engines
from cockpit.serving.depth import DepthConfig
from cockpit.errors import CockpitError
from cockpit.serving.engine import Engine
from cockpit.serving.groupmodel import GroupLauncher
from cockpit.serving.helpschema import load_schema
from cockpit.serving.lint import LintReport, fix_line
from cockpit.serving.request import CORE_PARAMS, DEFAULT_DIST_PORT, LaunchRequest, depth_of  # noqa: F401 - the groups' words
from cockpit.serving.logread import diagnose_lines
from cockpit.serving.server import LogFollower, wait_ready

class LaunchParams(Mapping[str, Param]):
    """The launch step's parameters: the core's, then every registered engine's own (read when first asked, so that
    loading the step kinds does not load the engines).  An engine may not redeclare the core's or another's."""

    def __init__(self, core: dict[str, Param]) -> None:
        self._core = core
        self._merged: dict[str, Param] | None = None

    def _all(self) -> dict[str, Param]:
        if self._merged is None:
            from cockpit.serving import engines

            merged = dict(self._core)
            merged["engine"] = Param(str, engines.DEFAULT, help="the engine that serves: " + ", ".join(engines.names())
                                     + f" (default {engines.DEFAULT})")
            owner: dict[str, str] = {}
            for engine in engines.engines():
                for key, param in engine.params.items():
                    if key in self._core or key in owner:
                        raise RuntimeError(f"engine {engine.name} redeclares the launch parameter {key!r} "
                                           f"({'the core' if key in self._core else owner[key]}'s)")
                    owner[key] = engine.name
                    merged[key] = param
            self._merged = merged
        return self._merged

    def __getitem__(self, key: str) -> Param:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


@dataclass
class Refused:
    """A launch refused before anything started: the lint's report and the command line it judged."""

    report: LintReport
    argv: list[str]
    message: str | None = None


class ServeLaunch(Launch):
    name = "serve_launch"
    aliases = ("sglang_launch",)
    destructive = True
    launch = True
    params = LaunchParams(CORE_PARAMS)  # the core's, then each engine's own (Engine.params)

    @staticmethod
    def request(spec: StepSpec) -> LaunchRequest:
        """The step's launch request, typed (built from its parameters, validated before)."""
        return LaunchRequest.of(spec, engines.engine(spec.params.get("engine")).params)

    @staticmethod
    def engine(spec: StepSpec) -> str:
        """The step's engine's name (an unknown one is refused by validate)."""
        return spec.params.get("engine") or engines.DEFAULT

    @staticmethod
    def engine_of(spec: StepSpec) -> Engine:
        return engines.engine(spec.params.get("engine"))

    @staticmethod
    def group_of(spec: StepSpec) -> GroupLauncher:
        """The step's engine's launch over several nodes (validate refuses hosts = [...] for an engine without one)."""
        engine = engines.engine(spec.params.get("engine"))
        if engine.group is None:
            raise CockpitError(f"a launch over several nodes is not {engine.label}'s yet: give one host")
        return engine.group

    def engine_name(self, spec: StepSpec) -> str:
        return engines.label(self.engine(spec))

    def title(self, spec: StepSpec) -> str:
        depth = depth_of(spec.params)
        nodes = self.hosts(spec)
        where = spec.host if len(nodes) == 1 else f"{len(nodes)} nodes ({', '.join(nodes)})"
        return spec.title or f"launch {self.engine_name(spec)} on {where}" + (f", {depth.label}" if depth else "")

    def why(self, spec: StepSpec) -> str:
        return f"flags checked against the host's own {self.engine_name(spec)} first; runs only with fresh clean-GPU evidence"

    def validate(self, spec: StepSpec) -> str | None:
        if not engines.known(spec.params.get("engine")):
            return f"engine must be one of {', '.join(repr(n) for n in engines.names())}, got {spec.params.get('engine')!r}"
        engine = self.engine_of(spec)
        problem = engine.validate_launch(spec.params, len(self.hosts(spec)))
        if problem:
            return problem
        if len(self.hosts(spec)) > 1 and engine.group is None:
            return f"a launch over several nodes is not {engine.label}'s yet: give one host"
        depth = depth_of(spec.params)
        if depth is not None and depth.speculative and (depth.topk or 1) > 1 and not engine.capabilities.tree_drafts:
            return f"{engine.label} drafts a chain: give 'depth' (num_speculative_tokens), not a topk > 1 tree"
        if spec.params.get("depth") is not None and any(spec.params.get(k) is not None for k in ("steps", "topk", "draft_tokens")):
            return "give 'depth' (a topk-1 chain) or SGLang's 'steps'/'topk'/'draft_tokens', not both"
        if spec.params.get("steps") is not None and (spec.params.get("topk") or 1) > 1 and spec.params.get("draft_tokens") is None:
            return "with topk > 1, give 'draft_tokens' too (how many tokens of the tree are verified)"
        depth = depth_of(spec.params)
        if depth is not None and depth.problem():
            return depth.problem()
        extra = spec.params.get("extra_args") or []
        if not all(isinstance(w, str) for w in extra):
            return "extra_args must be a list of strings"
        if spec.params.get("image") is not None:
            from cockpit.where.launch import ENGINES

            image = str(spec.params["image"])
            if not image or image.startswith("-") or any(c.isspace() for c in image):
                return f"image {image!r} is not an image name"
            if spec.params.get("container_engine", "docker") not in ENGINES:
                return f"container_engine must be 'docker' or 'podman', got {spec.params.get('container_engine')!r}"
            gpus = str(spec.params.get("container_gpus", "all"))
            if gpus not in ("all", "none") and not all(g.strip().isdigit() for g in gpus.split(",")):
                return f"container_gpus must be all, none or GPU indices such as 0,1,2,3, got {gpus!r}"
            if not all(isinstance(w, str) for w in spec.params.get("container_args") or []):
                return "container_args must be a list of strings"
            if len(self.hosts(spec)) > 1:
                return "a launch over several nodes runs on the hosts themselves so far: give one host, or no image"
        elif any(spec.params.get(k) is not None for k in ("container_name", "container_args")):
            return "container_name and container_args go with image (the server runs in a container of it)"
        nodes = self.hosts(spec)
        if spec.params.get("nnodes") is not None and spec.params["nnodes"] != len(nodes):
            return f"nnodes is {spec.params['nnodes']} but the group has {plural(len(nodes), 'host')}: {', '.join(nodes)}"
        if len(nodes) > 1:
            addr = spec.params.get("dist_init_addr")
            if addr is not None:
                host, _, port = addr.rpartition(":")
                if not host or not port.isdigit() or not 0 < int(port) < 65536:
                    return f"dist_init_addr '{addr}' must be host:port, e.g. 10.0.0.1:20000"
        return None

    def check_references(self, spec: StepSpec, before, config):
        nodes = self.hosts(spec)
        if len(nodes) < 2:
            return None
        rank0 = config.host(nodes[0])
        addr = spec.params.get("dist_init_addr")
        if addr is None:
            if rank0.local:
                return "dist_init_addr", (f"rank 0 ({rank0.name}) is this machine: give dist_init_addr, the address:port the other nodes "
                                          "reach it at")
            return None
        host = addr.rpartition(":")[0].strip("[]")
        if host not in (rank0.address, rank0.name) and not rank0.local:
            return "dist_init_addr", (f"{addr} is not rank 0's address ({rank0.name} is {rank0.address}): the other nodes would wait "
                                      "for a rendezvous that is never there; rank 0 is the first of 'hosts'")
        return None

    def log_path(self, spec: StepSpec) -> str:
        return self.request(spec).log or f"/tmp/{self.engine(spec)}-{spec.name}.log"

    def container(self, spec: StepSpec) -> tuple[str, str, str] | None:
        """(engine, container name, image) when the step runs its server in a container."""
        asked = self.request(spec)
        if not asked.image:
            return None
        from cockpit.where.launch import container_name

        return asked.container_engine, container_name(spec.name, asked.container_name), asked.image

    def in_container(self, spec: StepSpec, server: list[str]) -> list[str]:
        """The server's command line as the step runs it: as it is, or inside `docker run` of the step's image."""
        box = self.container(spec)
        if box is None:
            return server
        from cockpit.where.launch import model_mounts, run_argv

        engine, name, image = box
        asked = self.request(spec)
        return run_argv(engine, name, image, server, model_mounts(asked.model_path, asked.draft_path), dict(asked.env) or None,
                        asked.container_gpus, list(asked.container_args) or None)

    def server_words(self, spec: StepSpec, argv: list[str]) -> list[str]:
        """The server's own command line within what the step runs (for the lint)."""
        box = self.container(spec)
        if box is None:
            return argv
        from cockpit.where.launch import server_part

        return server_part(argv, box[2])

    def base_argv(self, runbook, spec: StepSpec, python: str | None = None) -> list[str]:
        """The command line the step runs without a variant: a fix applied by hand (kept until reset),
        else the one its parameters build (inside the step's image when it names one)."""
        if runbook is not None and spec.name in runbook.overrides:
            return list(runbook.overrides[spec.name])
        return self.in_container(spec, self.server_argv_of(spec, python))

    def server_argv_of(self, spec: StepSpec, python: str | None = None) -> list[str]:
        """The engine's own command line of the step's parameters (in a container: the image's python3)."""
        request = self.request(spec)
        python = "python3" if request.image else (request.python or python or "python3")
        return self.engine_of(spec).server_argv(request, python)

    def argv(self, ctx: RunContext | None, spec: StepSpec) -> list[str]:
        base = self.base_argv(ctx.runbook if ctx else None, spec, ctx.hub.config.host(spec.host).python if ctx else None)
        if ctx is not None and any(k in ctx.variant for k in ("depth", "steps", "topk", "draft_tokens")):
            base = self.engine_of(spec).with_depth(base, depth_of(spec.params) or DepthConfig())  # one run of a sweep: only the depth varies
        if ctx is not None and ctx.variant.get("draft_path"):  # a checkpoint measured (bench/checkpoints.py): only the draft varies
            base = self.engine_of(spec).with_draft(base, str(ctx.variant["draft_path"]))
        return base

    def lint(self, argv: list[str], spec: StepSpec, schema) -> LintReport:
        """The engine's own lint of the command line (its version's rules and, with its --help, its flags)."""
        engine = self.engine_of(spec)
        return engine.lint(self.server_words(spec, argv), self.request(spec).param(engine.version_key), schema)

    async def schema(self, ctx: RunContext, spec: StepSpec):
        asked = self.request(spec)
        if asked.help_text:
            return load_schema(asked.help_text)
        box = self.container(spec)
        launcher = None
        if box is not None:
            from cockpit.where.launch import in_image

            # the image's own engine: its version and --help, asked inside it (with the server's env and mounts)
            launcher = in_image(box[0], box[2], dict(asked.env) or None, list(asked.container_args) or None)
        python = asked.python_on(ctx.hub.config.host(spec.host).python)
        return await self.engine_of(spec).host_schema(ctx.transport(spec.host), python, launcher)  # the host's own engine

    async def plan(self, ctx: RunContext, spec: StepSpec):
        if len(self.hosts(spec)) > 1:
            return await self.group_of(spec).plan_group(self, ctx, spec)
        argv = self.argv(ctx, spec)
        lint = LintReport()
        if self.request(spec).lint:
            lint = self.lint(argv, spec, await self.schema(ctx, spec))
            if not lint.ok:
                return None, Refused(lint, argv)
        old = self.previous(ctx, spec)
        old_pid = old.pid if old else None
        lines = []
        if old_pid:
            lines.append(f"On {spec.host}, stop the server this step started before (pid {old_pid}) if it still runs.")
        box = self.container(spec)
        if box is not None:
            lines.append(f"On {spec.host}, remove the container {box[1]} a launch left, if there is one ({box[0]} rm --force {box[1]}).")
            lines.append(f"On {spec.host}, start {self.engine_name(spec)} in a {box[0]} container {box[1]} of {box[2]}, its client "
                         f"detached (its output appended to {self.log_path(spec)}):")
        else:
            lines.append(f"On {spec.host}, start {self.engine_name(spec)} detached (log appended to {self.log_path(spec)}):")
        lines.append("  " + quote_argv(argv))
        for diagnosis in lint.diagnoses:
            if diagnosis.severity != "info":
                lines.append(f"  {diagnosis.severity}: {diagnosis.message}")
        return "\n".join(lines), (old_pid, lint, argv)

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        if len(self.hosts(spec)) > 1 and not isinstance(planned, Refused):
            from cockpit.serving.group import run_group

            return await run_group(self.group_of(spec), self, ctx, spec, planned)  # the core drives the engine's plan
        if isinstance(planned, Refused):
            errors = planned.report.errors
            why = planned.message or errors[0].message
            return StepResult(StepState.FAILED, started, _now(), f"refused before launch: {why}",
                              {"argv": planned.argv, "diagnoses": [d.to_json() for d in planned.report.diagnoses]})
        old_pid, lint, argv = planned
        box = self.container(spec)
        if box is not None:
            # the container the last launch left (stopped, kept so its end could be read): the name is taken until it goes
            removed = await ctx.transport(spec.host).run([box[0], "rm", "--force", box[1]], timeout=120)
            ctx.audit("container_rm", host=spec.host, step=spec.name, container=box[1], exit=removed.exit_status)
        pid, problem = await self.start(ctx, spec, argv, old_pid)
        if pid is None:
            return StepResult(StepState.FAILED, started, _now(), problem)
        log = self.log_path(spec)
        server = LaunchedProcess(spec.host, pid, log, tuple(argv), self.request(spec).port, started)
        evidence = {**server.to_evidence(), "lint": [d.to_json() for d in lint.diagnoses]}
        if box is not None:
            evidence["container"] = {"engine": box[0], "name": box[1], "image": box[2]}
        if problem:
            follower = LogFollower(ctx.transport(spec.host), log, backlog_bytes=512 * 1024)
            lines = await follower.poll()
            report = diagnose_lines(lines)
            evidence["diagnoses"] = [d.to_json() for d in report.diagnoses]
            top = report.diagnoses[0].message if report.diagnoses else f"no diagnosis; see {log}"
            return StepResult(StepState.FAILED, started, _now(), f"the server exited: {top}", evidence, "\n".join(lines[-40:]))
        return StepResult(StepState.PASSED, started, _now(), f"running as pid {pid} on port {evidence['port']}, log {log}", evidence)


class ServeReady(StepKind):
    name = "serve_ready"
    aliases = ("sglang_ready",)
    params = {
        "launch_step": Param(str, None, help="the launch step to wait for (default: the last one before)"),
        "timeout_s": Param((int, float), 1800.0, help="loading a large model can take tens of minutes"),
        "poll_s": Param((int, float), 1.0),
    }

    def title(self, spec: StepSpec) -> str:
        return spec.title or f"the server on {spec.host} ready"  # SGLang's or vLLM's: the launch step says which

    def why(self, spec: StepSpec) -> str:
        return "waits for /health 200 (refused = loading, 503 = warming up); a dead server is diagnosed from its log"

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        if "health" not in evidence:
            return []
        lines = [f"health: {evidence.get('health')} after {evidence.get('seconds')} s (pid {evidence.get('pid')}, port {evidence.get('port')})"]
        if evidence.get("milestones"):
            lines.append("start-up: " + " > ".join(evidence["milestones"]))
        lines += [f"diagnosis: [{d.get('kind')}] {d.get('message')}" for d in evidence.get("diagnoses") or [] if isinstance(d, dict)]
        return lines

    def rests_on(self, runbook, spec: StepSpec) -> tuple[str, ...]:
        return (self.launch_of(runbook, spec),)  # ready means its launch's server answered

    def launch_of(self, runbook, spec: StepSpec) -> str:
        """The launch step this one waits for: named, or the last one before it."""
        if spec.params.get("launch_step"):
            return runbook.spec.step(spec.params["launch_step"]).name
        steps = runbook.spec.steps
        before = [s for s in steps[: steps.index(spec)] if is_launch(s.kind)]
        if not before:
            from cockpit.errors import CockpitError

            raise CockpitError("no serve_launch step before this one")
        return before[-1].name

    def _launch_spec(self, ctx: RunContext, spec: StepSpec) -> StepSpec:
        return ctx.runbook.spec.step(self.launch_of(ctx.runbook, spec))

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        launch = self._launch_spec(ctx, spec)
        result = ctx.runbook.result(launch.name)
        server = ctx.runbook.launched(launch.name)
        if result is None or result.state is not StepState.PASSED or server is None or server.port is None:
            return StepResult(StepState.FAILED, started, _now(), f"'{launch.name}' has not started a server")
        from cockpit.hosts.procs import group_of

        members = group_of(result.evidence)
        if len(members) > 1:
            from cockpit.serving.group import group_ready

            return await group_ready(ServeLaunch.group_of(launch), ctx, spec, launch, members, float(spec.params.get("timeout_s", 1800.0)),
                                                                               float(spec.params.get("poll_s", 1.0)))
        transport = ctx.transport(launch.host)
        outcome = await wait_ready(transport, server.pid, server.port, server.log,
                                   float(spec.params.get("timeout_s", 1800.0)), float(spec.params.get("poll_s", 1.0)))
        facts = {"pid": server.pid, "port": server.port, "log": server.log, "health": outcome.health,
                 "seconds": round(outcome.seconds, 1), "milestones": [m for m, _ in outcome.report.milestones],
                 "diagnoses": [d.to_json() for d in outcome.diagnoses]}
        tail = "\n".join(outcome.lines[-40:])
        served = ""
        if outcome.state == "ready" and ServeLaunch.engine_of(launch).capabilities.served_models:
            # its /health says the engine is up; /v1/models says what it serves (the name clients must use)
            from cockpit.serving.live import get, opener_for

            answer = await get(opener_for(transport), f"http://127.0.0.1:{server.port}/v1/models")
            try:
                models = [m.get("id") for m in json.loads(answer[1]).get("data", [])] if answer and answer[0] == 200 else None
            except (ValueError, AttributeError):
                models = None
            facts["served_models"] = models
            served = f", serving {', '.join(map(str, models))}" if models else " (/v1/models did not answer with a model list)"
        if outcome.state == "ready":
            warnings = [d.message for d in outcome.diagnoses]
            message = f"ready after {outcome.seconds:.0f} s on port {server.port}{served}" + (f"; but {warnings[0]}" if warnings else "")
            state = StepState.FAILED if any(d.kind == "draft_weights_not_loaded" for d in outcome.diagnoses) else StepState.PASSED
            return StepResult(state, started, _now(), message, facts, tail)
        if outcome.state == "dead":
            top = outcome.diagnoses[0].message if outcome.diagnoses else "no diagnosis in the log"
            return StepResult(StepState.FAILED, started, _now(), f"the server died: {top}", facts, tail)
        return StepResult(StepState.FAILED, started, _now(), f"not ready after {outcome.seconds:.0f} s (health: {outcome.health})", facts, tail)



def launch_depth(runbook, spec: StepSpec) -> DepthConfig | None:
    """The configuration a launch step runs now (the one a fix produced, say); None when its command
    line does not say."""
    kind = runbook.kind(spec)
    if not isinstance(kind, ServeLaunch):
        return None
    return kind.engine_of(spec).depth_of_argv(kind.base_argv(runbook, spec))


def fixed_extra_args(kind: "ServeLaunch", spec: StepSpec, fixed: list[str]) -> list[str] | None:
    """The step's extra_args that make its own command line the fixed one, when the fix changed only those (None: it
    changed what the step builds from its other keys, or the step runs in an image)."""
    from dataclasses import replace

    if kind.container(spec) is not None or not fixed:
        return None
    bare = replace(spec, params={**spec.params, "extra_args": []})
    base = kind.server_argv_of(bare, fixed[0])
    if fixed[:len(base)] != base:
        return None
    extra = list(fixed[len(base):])
    if kind.server_argv_of(replace(spec, params={**spec.params, "extra_args": extra}), fixed[0]) != fixed:
        return None
    return extra


def write_fix_to_config(runbook, step: str, fixed: list[str], config_path, why: str) -> str:
    """The fix, written to the config file the user keeps (its step's extra_args), so that the file says what runs:
    returns what was done, in words."""
    from cockpit.config import rewrite_step_list

    spec = runbook.spec.step(step)
    kind = runbook.kind(spec)
    if config_path is None:
        return "no config file to write it to: kept in the runbook's state until `plan reset`"
    extra = fixed_extra_args(kind, spec, fixed) if isinstance(kind, ServeLaunch) else None
    if extra is None:
        return (f"{config_path} not changed: the fix changes more than '{step}'s extra_args; kept in the runbook's state until "
                "`plan reset`")
    if extra == list(spec.params.get("extra_args") or []):
        return f"{config_path} already says it"
    problem = rewrite_step_list(config_path, step, "extra_args", extra, why)
    if problem is not None:
        return problem + "; the fix is kept in the runbook's state until `plan reset`"
    return f"written to {config_path}: '{step}' extra_args = {shell_words(extra) or '(none)'}"


def fix_note(diagnosis) -> str:
    """The comment the config file keeps beside a fix written into it."""
    import time

    return (f"cockpit {time.strftime('%Y-%m-%d %H:%M')}: fixed {diagnosis.kind}"
            + (f" {diagnosis.flag}" if diagnosis.flag else "") + f": {diagnosis.message[:160]}")


def apply_diagnosis_fix(runbook, step: str, diagnosis) -> list[str]:
    """Make a diagnosis's fix the launch step's command line (kept until `plan reset`); returns it.
    Raises CockpitError when there is nothing to apply it to."""
    from cockpit.errors import CockpitError

    server = runbook.launched(step)
    result = runbook.result(step)
    argv = list(server.argv) if server else (result.evidence or {}).get("argv") if result else None
    if not argv:
        raise CockpitError("the launch step recorded no command line")
    spec = runbook.spec.step(step)
    kind = runbook.kind(spec)
    engine = kind.engine_of(spec) if isinstance(kind, ServeLaunch) else engines.engine(None)
    fixed = engine.apply_fix(argv, diagnosis)  # the engine's own: vLLM's folds every old speculative flag into one JSON
    version = spec.params.get(engine.version_key) if isinstance(kind, ServeLaunch) else None
    whole = fix_line(fixed, lambda words: engine.lint(words, version, None), engine.apply_fix)  # what else its release refuses
    if whole.applied:
        fixed = whole.words
    runbook.set_override(step, fixed, f"applied fix for {diagnosis.kind} {diagnosis.flag}: {shell_words(diagnosis.replacement or ())}"
                         + (f" (and {', '.join(d.kind for d in whole.applied)})" if whole.applied else ""))
    return fixed


SERVING_KINDS = (ServeLaunch, ServeReady)
LAUNCH_KINDS = ("serve_launch", *ServeLaunch.aliases)
READY_KINDS = ("serve_ready", *ServeReady.aliases)


def is_launch(kind: str) -> bool:
    """A step kind that launches a server (its name or an old alias)."""
    return kind in LAUNCH_KINDS


def is_ready(kind: str) -> bool:
    return kind in READY_KINDS
