"""The texts that say a GPU process died or hangs, written once for every reader of logs: a
training run (runs/parse.py), a serving server's live figures (serving/live.py) and a launch group's
nodes (sglang/group.py).  Sources: runs-facts a.7 and b.6-b.7, scale-facts §1.4."""

from __future__ import annotations

CUDA_OOM = r"OutOfMemoryError|CUDA out of memory"
NCCL_TIMEOUT = r"Watchdog caught collective operation timeout|Timeout at NCCL work|Some NCCL operations have failed or timed out"
SCHEDULER_DIED = r"Scheduler hit an exception|scheduler is dead|Received sigquit from a child process"

# torch.distributed's rendezvous (c10d), the same words under every engine that uses it
RENDEZVOUS_TIMEOUT = r"DistStoreError: Timed out after (?P<s>\d+) seconds waiting for clients\. (?P<n>\d+)/(?P<m>\d+) clients joined"
PEER_UNREACHABLE = r"client socket has timed out after (?P<ms>\d+)ms while trying to connect to \((?P<host>[^,]+), (?P<port>\d+)\)"
