"""What vLLM's EAGLE-3 loader does with a draft, by release (vllm-facts §3, its wheels' registry.py and configs/eagle.py),
for the drafter's checks: no EAGLE-3 before 0.8.5; the speculators config.json from 0.10.2; the architecture names its
registry has for a Llama EAGLE-3 draft (0.9-0.10.1 turn X into Eagle3X and register only Eagle3LlamaForCausalLM; 0.10.2
on registers both); the MLA draft from 0.34.0; one decoder layer up to 0.33.  It ignores t2d."""

from __future__ import annotations

import re

from cockpit.serving.engine import DraftLoading

RANGES = ("vLLM <=0.8.4", "vLLM 0.8.5", "vLLM 0.9-0.10.1", "vLLM 0.10.2-0.33", "vLLM >=0.34.0")


def version_range(version: str) -> str:
    numbers = [int(n) for n in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    key = tuple(numbers[:3])
    if key < (0, 8, 5):
        return RANGES[0]
    if key < (0, 9, 0):
        return RANGES[1]
    if key < (0, 10, 2):
        return RANGES[2]
    if key < (0, 34, 0):
        return RANGES[3]
    return RANGES[4]


LOADING = DraftLoading("vLLM", RANGES, version_range, {
    "no_eagle3": RANGES[:1],  # method eagle3 came in 0.8.5
    "speculators_config": RANGES[:3],  # read from 0.10.2
    "architecture_unsupported": RANGES[:4],  # the MLA draft from 0.34.0
    "architecture_name": RANGES[2:3],  # LlamaForCausalLMEagle3 unknown to 0.9-0.10.1
    "num_hidden_layers": RANGES[1:4],  # one decoder layer up to 0.33
})
