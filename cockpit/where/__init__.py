"""Where a training run or a server runs, and what its workload manager says of it.

A bare process is watched through the host's /proc (hosts/liveness.py).  A Slurm job, a Docker or Podman
container and a Kubernetes pod are asked of their manager (`scontrol`/`sacct`, `docker inspect`, `kubectl
get pod -o json`) over the host's own transport, argument lists only: its state, exit code and reason, the
node it runs on, and its log when no file is named (Slurm's StdOut file, `docker logs -f --timestamps`,
`kubectl logs -f --timestamps`).  What the manager says is the truth for a job's end; where it cannot be
asked, the answer is `unknown` with why, never a guess.

- placement.py: `Placement` (the config's keys, validated in one place for runs and servers)
- state.py:     `ManagerState`, what a manager said, in its own words and the cockpit's
- slurm.py, container.py, pod.py: one adapter each (`adapter_for(placement)`)
- follow.py:    a manager's log stream followed as a file is (new lines per poll, bounded)
"""

from cockpit.where.adapters import adapter_for
from cockpit.where.placement import Placement, parse_placement
from cockpit.where.state import ManagerState

__all__ = ["ManagerState", "Placement", "adapter_for", "parse_placement"]
