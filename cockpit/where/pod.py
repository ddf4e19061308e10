"""A Kubernetes pod, asked through `kubectl get pod -o json` on the host that has kubectl and its kubeconfig.
Fields per the API reference (pod-v1): status.phase (Pending, Running, Succeeded, Failed, Unknown);
status.containerStatuses[i]: name, state.{running,waiting{reason},terminated{exitCode,reason,finishedAt}},
lastState.terminated (the run before a restart), restartCount; spec.nodeName.  The terminated reasons come
from the container runtime (containerd's CRI: Completed for 0, Error, OOMKilled, StartError).  No API server
runs in this project's tests: they replay JSON of these fields through a STAND-IN kubectl."""

from __future__ import annotations

import json
import time

from cockpit.hosts.transport import Transport, TransportError
from cockpit.where.placement import Placement
from cockpit.where.state import FAILED, FINISHED, GONE, PENDING, RUNNING, UNKNOWN, ManagerState, command_problem, parse_time, unknown

def _terminated_words(term: dict) -> str:
    reason, code = term.get("reason") or "", term.get("exitCode")
    if reason == "OOMKilled":
        return "OOMKilled: the container exceeded its memory limit (resources.limits.memory)"
    words = reason or "terminated"
    if code not in (None, 0):
        words += f" (exit {code})"
    if term.get("message"):
        words += f": {str(term['message']).strip()[:200]}"
    return words


def state_of(label: str, pod: dict, container: str | None) -> ManagerState:
    raw_status, raw_spec = pod.get("status"), pod.get("spec")
    status: dict = raw_status if isinstance(raw_status, dict) else {}
    spec: dict = raw_spec if isinstance(raw_spec, dict) else {}
    phase_word = str(status.get("phase") or "Unknown")
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    mine = next((s for s in statuses if s.get("name") == container), None) if container else (statuses[0] if statuses else None)
    node = spec.get("nodeName")
    restarts = mine.get("restartCount", 0) if mine and isinstance(mine.get("restartCount"), int) else 0
    state = (mine or {}).get("state") or {}
    last = ((mine or {}).get("lastState") or {}).get("terminated") or {}
    term = state.get("terminated") or {}
    code = term.get("exitCode")
    started = parse_time((state.get("running") or {}).get("startedAt") or term.get("startedAt"))
    finished = parse_time(term.get("finishedAt"))
    reason = ""
    if container and mine is None and statuses:
        return unknown("Kubernetes", label, f"the pod has no container {container} (it has: {', '.join(str(s.get('name')) for s in statuses)})")
    if state.get("running"):
        phase = RUNNING
        if restarts and last:
            reason = f"the last run ended {_terminated_words(last)}"
    elif state.get("waiting"):
        # not running and not ended: the kubelet starts it again (CrashLoopBackOff) or keeps trying (ImagePullBackOff)
        waiting = state["waiting"].get("reason") or "waiting"
        phase = PENDING
        reason = f"{waiting}: restarting after {_terminated_words(last)}" if last else waiting
    elif term:
        phase = FINISHED if code == 0 else FAILED
        reason = "" if code == 0 else _terminated_words(term)
    elif phase_word == "Succeeded":
        phase = FINISHED
    elif phase_word == "Failed":
        phase, reason = FAILED, str(status.get("reason") or status.get("message") or "the pod failed")
    elif phase_word == "Pending":
        phase, reason = PENDING, str(status.get("reason") or "scheduling or pulling the image")
    elif phase_word == "Running":
        phase = RUNNING
    else:
        phase, reason = UNKNOWN, f"the pod's phase is {phase_word}"
    raw_meta = pod.get("metadata")
    meta: dict = raw_meta if isinstance(raw_meta, dict) else {}
    raw_uid = meta.get("uid")
    uid: str = raw_uid if isinstance(raw_uid, str) else ""
    return ManagerState("Kubernetes", label, phase, phase_word if not term else (term.get("reason") or phase_word),
                        None if code is None else str(code), reason, node, None, restarts, started, finished, at=time.time(),
                        cgroup_mark=uid)  # the kubelet's cgroup names the pod by its uid (pod<uid>, '-' as '_' under systemd)


class Pod:
    def __init__(self, placement: Placement):
        self.placement = placement
        self.seen = False

    def _base(self) -> list[str]:
        argv = ["kubectl"]
        if self.placement.context:
            argv += ["--context", self.placement.context]
        if self.placement.namespace:
            argv += ["--namespace", self.placement.namespace]
        return argv

    def log_argv(self, since: str | None = None) -> list[str]:
        return [*self._base(), "logs", "--follow", "--timestamps", *(["--since-time", since] if since else []), self.placement.name,
                *(["--container", self.placement.container] if self.placement.container else [])]

    async def look(self, transport: Transport) -> ManagerState:
        label = self.placement.label
        try:
            result = await transport.run([*self._base(), "get", "pod", self.placement.name, "--output", "json"], timeout=30)
        except TransportError as exc:
            return unknown("Kubernetes", label, f"cannot run kubectl on {transport.name}: {exc}")
        text = result.output.strip()
        problem = command_problem("Kubernetes", label, "kubectl", transport.name, text if result.exit_status != 0 else "",
                                  result.exit_status)
        if problem is not None:
            return problem
        if result.exit_status != 0:
            if "NotFound" in text or "not found" in text:
                if self.seen:
                    return ManagerState("Kubernetes", label, GONE, at=time.time(), why="the pod is gone from the API server (deleted)")
                return unknown("Kubernetes", label, f"no pod {self.placement.name}: {text.splitlines()[-1][:160]}")
            return unknown("Kubernetes", label, f"kubectl on {transport.name}: {text.splitlines()[-1][:200] if text else 'no answer'}")
        try:
            pod = json.loads(result.stdout)
        except ValueError:
            return unknown("Kubernetes", label, "kubectl's answer is not JSON")
        if not isinstance(pod, dict):
            return unknown("Kubernetes", label, "kubectl's answer is not a pod")
        self.seen = True
        return state_of(label, pod, self.placement.container)
