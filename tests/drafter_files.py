"""Real EAGLE-3 draft checkpoints made with safetensors' own writer, small dimensions, no torch.

A tensor here is its dtype, shape and bytes (`T`); files are written by `safetensors.serialize_file`
and read back by `safetensors.deserialize`, so "bit-identical" is a comparison of bytes.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import safetensors

HIDDEN, INTER, VOCAB, DRAFT_VOCAB, HEADS, KV_HEADS = 64, 128, 1000, 100, 4, 2
SIZES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "I32": 4, "I16": 2, "BOOL": 1, "U8": 1}
NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "I64": "int64", "I32": "int32", "I16": "int16",
         "BOOL": "bool", "U8": "uint8"}


@dataclass(frozen=True)
class T:
    """A tensor as safetensors stores it."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @classmethod
    def of(cls, dtype: str, shape, fill: bytes | None = None, seed: int = 0) -> "T":
        count = 1
        for d in shape:
            count *= d
        size = count * SIZES[dtype]
        data = fill if fill is not None else random.Random(seed).randbytes(size)
        assert len(data) == size
        return cls(dtype, tuple(shape), bytes(data))


def int64s(values) -> bytes:
    return b"".join(int(v).to_bytes(8, "little", signed=True) for v in values)


def save_file(tensors: dict[str, T], path, metadata: dict[str, str] | None = None) -> None:
    keep = []
    specs = {}
    for name, t in tensors.items():
        if hasattr(safetensors, "TensorSpec"):  # safetensors >= 0.7
            buf = ctypes.create_string_buffer(t.data, max(1, len(t.data)))
            keep.append(buf)
            specs[name] = safetensors.TensorSpec(dtype=NAMES[t.dtype], shape=list(t.shape), data_ptr=ctypes.addressof(buf),
                                                 data_len=len(t.data))
        else:
            specs[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data": t.data}
    safetensors.serialize_file(specs, os.fspath(path), metadata=metadata)


def load_file(path) -> dict[str, T]:
    return {name: T(info["dtype"], tuple(info["shape"]), bytes(info["data"]))
            for name, info in safetensors.deserialize(Path(path).read_bytes())}


def load_all(folder: Path) -> dict[str, T]:
    out: dict[str, T] = {}
    for file in sorted(Path(folder).glob("*.safetensors")):
        out.update(load_file(file))
    return out


def eagle3_tensors(layout: str = "midlayer", seed: int = 0) -> dict[str, T]:
    head_dim = HIDDEN // HEADS
    counter = iter(range(seed * 1000, seed * 1000 + 1000))

    def rand(*shape):
        return T.of("BF16", shape, seed=next(counter))

    prefix = "midlayer." if layout == "midlayer" else "layers.0."
    return {
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
        "d2t": T.of("I64", (DRAFT_VOCAB,), int64s(range(DRAFT_VOCAB))),
        "t2d": T.of("BOOL", (VOCAB,), bytes(VOCAB)),
    }


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
    total = sum(len(t.data) for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return folder


def needs_torch():
    """torch, for the tests of what only torch can make (.bin/.pt checkpoints); a skip that says why,
    or a failure where CI promised torch (COCKPIT_REQUIRE_TORCH=1, set by .ci/run)."""
    try:
        import torch
    except ImportError:
        if os.environ.get("COCKPIT_REQUIRE_TORCH") == "1":
            pytest.fail("torch is not installed, but COCKPIT_REQUIRE_TORCH=1 (.ci/run installs the CPU build)")
        pytest.skip("needs torch (pip install '.[torch]'): .bin/.pt checkpoints are made and read with torch")
    try:
        import numpy  # noqa: F401 - torch without numpy warns and cannot hand safetensors its arrays
    except ImportError:
        if os.environ.get("COCKPIT_REQUIRE_TORCH") == "1":
            pytest.fail("numpy is not installed beside torch, but COCKPIT_REQUIRE_TORCH=1")
        pytest.skip("torch is here but numpy is not: pip install '.[torch]' installs both")
    return torch


def to_torch(torch, t: T):
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "I64": torch.int64, "BOOL": torch.bool}
    return torch.frombuffer(bytearray(t.data), dtype=dtypes[t.dtype]).reshape(t.shape).clone()


# --- drafts laid out as each trainer (or exporter) writes them --------------------------------------

def speculators_config() -> dict:
    """vLLM speculators' config.json (speculators/models/eagle3/config.py, config.py): no model_type at the
    top, the decoder layer's settings in transformer_layer_config."""
    return {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.3.0",
        "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                               "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                               "verifier": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct", "architectures": ["LlamaForCausalLM"]}},
        "transformer_layer_config": {"model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": INTER,
                                     "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HIDDEN // HEADS,
                                     "num_hidden_layers": 1, "vocab_size": VOCAB, "rms_norm_eps": 1e-05,
                                     "max_position_embeddings": 2048, "rope_theta": 500000.0, "hidden_act": "silu"},
        "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False, "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3], "torch_dtype": "bfloat16", "transformers_version": "4.56.0",
    }


MLA = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8}


def kimi_mla_tensors(seed: int = 3) -> dict[str, T]:
    """The layout of published Kimi-K2.5 EAGLE-3 drafts (SGLang's kimi_k25_eagle3.py loads it): an MLA
    attention in layers.0.*, the target's embedding included."""
    heads, q, kv, nope, rope, v = HEADS, MLA["q_lora_rank"], MLA["kv_lora_rank"], MLA["qk_nope_head_dim"], MLA["qk_rope_head_dim"], MLA["v_head_dim"]
    counter = iter(range(seed * 1000, seed * 1000 + 1000))

    def rand(*shape):
        return T.of("BF16", shape, seed=next(counter))

    return {
        "layers.0.self_attn.q_a_proj.weight": rand(q, 2 * HIDDEN), "layers.0.self_attn.q_a_layernorm.weight": rand(q),
        "layers.0.self_attn.q_b_proj.weight": rand(heads * (nope + rope), q),
        "layers.0.self_attn.kv_a_proj_with_mqa.weight": rand(kv + rope, 2 * HIDDEN),
        "layers.0.self_attn.kv_a_layernorm.weight": rand(kv), "layers.0.self_attn.kv_b_proj.weight": rand(heads * (nope + v), kv),
        "layers.0.self_attn.o_proj.weight": rand(HIDDEN, heads * v),
        "layers.0.mlp.gate_proj.weight": rand(INTER, HIDDEN), "layers.0.mlp.up_proj.weight": rand(INTER, HIDDEN),
        "layers.0.mlp.down_proj.weight": rand(HIDDEN, INTER), "layers.0.input_layernorm.weight": rand(HIDDEN),
        "layers.0.hidden_norm.weight": rand(HIDDEN), "layers.0.post_attention_layernorm.weight": rand(HIDDEN),
        "embed_tokens.weight": rand(VOCAB, HIDDEN), "fc.weight": rand(HIDDEN, 3 * HIDDEN), "norm.weight": rand(HIDDEN),
        "lm_head.weight": rand(DRAFT_VOCAB, HIDDEN), "d2t": T.of("I64", (DRAFT_VOCAB,), int64s(range(DRAFT_VOCAB))),
        "t2d": T.of("BOOL", (VOCAB,), bytes(VOCAB)),
    }


def write_layout(folder: Path, layout: str) -> Path:
    """A small draft as a trainer writes it: specforge, modelopt (its HF export), speculators (vLLM), vllm_export
    (layers.0.* with an SGLang config, as TorchSpec's vLLM export or a trained checkpoint), kimi_mla."""
    folder.mkdir(parents=True, exist_ok=True)
    if layout in ("specforge", "modelopt"):
        config = eagle3_config() if layout == "specforge" else eagle3_config(
            eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3], "use_aux_hidden_state": True}, transformers_version="4.55.0")
        return write_draft(folder, "midlayer", config=config)
    if layout in ("speculators", "vllm_export"):
        tensors = {**eagle3_tensors("layers0"), "embed_tokens.weight": T.of("BF16", (VOCAB, HIDDEN), seed=99)}
        config = speculators_config() if layout == "speculators" else eagle3_config()
    elif layout == "kimi_mla":
        tensors = kimi_mla_tensors()
        config = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2", "hidden_size": HIDDEN,
                  "intermediate_size": INTER, "num_attention_heads": HEADS, "num_hidden_layers": 1, "vocab_size": VOCAB,
                  "draft_vocab_size": DRAFT_VOCAB, "tie_word_embeddings": False, **MLA}
    else:
        raise ValueError(layout)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder
