"""What every engine's multi-node hand-off shares (sglang/emit.py, vllm/group.py): a LeaderWorkerSet manifest with
its Service, the leader serving HTTP with a readiness probe, the workers joining it.  The engine brings the commands."""

from __future__ import annotations

import json


def lws_manifest(name: str, nodes: int, image: str, gpus: int, http_port: int, readiness_path: str, prefix: str,
                 leader: list[str], worker: list[str], header: str, probe_timeout_s: int | None = None) -> str:
    """A LeaderWorkerSet of `nodes` pods (the leader runs `leader`, each worker `worker`) and the Service in front of the
    leader; `header`: the comment lines that open it."""
    def flow(words: list[str]) -> str:
        return "[" + ", ".join(json.dumps(w) for w in words) + "]"

    timeout = f"\n              timeoutSeconds: {probe_timeout_s}" if probe_timeout_s else ""
    return f"""{header}
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: {name}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: {nodes}
    restartPolicy: RecreateGroupOnPodRestart
    leaderTemplate:
      metadata:
        labels:
          role: leader
      spec:
        containers:
          - name: {prefix}-leader
            image: {json.dumps(image)}
            command: {flow(leader)}
            resources:
              limits:
                nvidia.com/gpu: "{gpus}"
            ports:
              - containerPort: {http_port}
            readinessProbe:
              httpGet:
                path: {readiness_path}
                port: {http_port}
              periodSeconds: 10{timeout}
    workerTemplate:
      spec:
        containers:
          - name: {prefix}-worker
            image: {json.dumps(image)}
            command: {flow(worker)}
            resources:
              limits:
                nvidia.com/gpu: "{gpus}"
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
spec:
  selector:
    leaderworkerset.sigs.k8s.io/name: {name}
    role: leader
  ports:
    - protocol: TCP
      port: {http_port}
      targetPort: {http_port}
"""
