"""What SGLang's EAGLE-3 loader does with a draft, by release (sglang-facts §3), for the drafter's checks: what it does
with `layers.0.*` keys (up to 0.4.8 a crash, 0.4.9 to 0.5.11 silently skipped, acceptance length 1.00; 0.5.12 on
loaded), which configs and architectures it reads, and what it needs of the vocabulary maps."""

from __future__ import annotations

import re

from cockpit.serving.engine import DraftLoading

RANGES = ("<=0.4.8", "0.4.9-0.5.11", ">=0.5.12")


def version_range(version: str) -> str:
    numbers = [int(n) for n in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    key = tuple(numbers[:3])
    if key <= (0, 4, 8):
        return RANGES[0]
    if key <= (0, 5, 11):
        return RANGES[1]
    return RANGES[2]


LOADING = DraftLoading("SGLang", RANGES, version_range, {
    "layers0_keys": RANGES[:2],  # a crash up to 0.4.8, silently skipped to 0.5.11
    "missing_t2d": RANGES,  # its load_weights reads t2d
    "speculators_config": RANGES,  # `Unrecognized model ... Should have a model_type key`
    "architecture_unsupported": RANGES[:2],  # the MLA draft (kimi_k25_eagle3.py) from 0.5.12
    "wrong_architecture": RANGES,  # KeyError 'midlayer.self_attn.qkv_proj.weight'
    "num_hidden_layers": RANGES[:2],  # ValueError: EAGLE3 currently only supports 1 layer
    "draft_vocab_size_missing": RANGES,
    "t2d_vocab": RANGES, "d2t_dtype": RANGES, "t2d_dtype": RANGES,  # int64 d2t, bool t2d of the target's vocabulary
}, hint="layers.0.* keys: skipped silently by 0.4.9-0.5.11, accept len 1.00")
