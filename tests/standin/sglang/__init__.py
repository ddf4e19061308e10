"""STAND-IN for the `sglang` package, for tests only: a real SGLang needs GPUs.

`python -m sglang.launch_server` (launch_server.py beside this file) replays what the real server
prints and answers: the recorded `--help` of SGLang 0.5.23, argparse's usage crash for bad flags in
the real format, the real start-up milestone lines, and /health 503 then 200.
"""

import os

__version__ = os.environ.get("SGLANG_STANDIN_VERSION", "0.5.23")  # a node on another version: set it for that host
