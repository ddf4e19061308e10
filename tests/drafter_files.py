"""Real EAGLE-3 draft checkpoints made with torch and safetensors, small dimensions."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

HIDDEN, INTER, VOCAB, DRAFT_VOCAB, HEADS, KV_HEADS = 64, 128, 1000, 100, 4, 2


def eagle3_tensors(layout: str = "midlayer", seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    head_dim = HIDDEN // HEADS

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(torch.bfloat16)

    prefix = "midlayer." if layout == "midlayer" else "layers.0."
    tensors = {
        f"{prefix}self_attn.q_proj.weight": rand(HEADS * head_dim, 2 * HIDDEN),
        f"{prefix}self_attn.k_proj.weight": rand(KV_HEADS * head_dim, 2 * HIDDEN),
        f"{prefix}self_attn.v_proj.weight": rand(KV_HEADS * head_dim, 2 * HIDDEN),
        f"{prefix}self_attn.o_proj.weight": rand(HIDDEN, HEADS * head_dim),
        f"{prefix}mlp.gate_proj.weight": rand(INTER, HIDDEN),
        f"{prefix}mlp.up_proj.weight": rand(INTER, HIDDEN),
        f"{prefix}mlp.down_proj.weight": rand(HIDDEN, INTER),
        f"{prefix}input_layernorm.weight": rand(HIDDEN),
        f"{prefix}hidden_norm.weight": rand(HIDDEN),
        f"{prefix}post_attention_layernorm.weight": rand(HIDDEN),
        "fc.weight": rand(HIDDEN, 3 * HIDDEN),
        "norm.weight": rand(HIDDEN),
        "lm_head.weight": rand(DRAFT_VOCAB, HIDDEN),
        "d2t": torch.arange(DRAFT_VOCAB, dtype=torch.int64),
        "t2d": torch.zeros(VOCAB, dtype=torch.bool),
    }
    return tensors


def eagle3_config(**overrides) -> dict:
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "num_hidden_layers": 1, "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    config.update(overrides)
    return config


def write_draft(folder: Path, layout: str = "midlayer", shards: int = 1, config: dict | None = None, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tensors = eagle3_tensors(layout, seed)
    (folder / "config.json").write_text(json.dumps(config or eagle3_config(), indent=2))
    if shards == 1:
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
        return folder
    names = sorted(tensors)
    weight_map = {}
    for index in range(shards):
        part = {n: tensors[n] for n in names[index::shards]}
        file = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, folder / file, metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return folder
