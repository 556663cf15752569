"""Hugging Face Llama models in and out of coda.torch: from_hf builds a coda.torch.LlamaModel from a
LlamaForCausalLM (or its config) and converts its weights; to_hf_state_dict converts back, so checkpoints
round-trip. transformers itself is not needed: a config may be any object with LlamaConfig's attributes, and
state dicts are plain tensors.

Two layouts differ:
- RoPE. Hugging Face rotates dimension j of a head with dimension j + hd/2 (rotate_half); coda rotates the
  adjacent pair (2j, 2j + 1). Both use frequency j for that pair, so permuting the rows of W_q and W_k within each
  head (HF row half * hd/2 + j is coda row 2j + half) gives the same attention: q.k is a sum over dimensions,
  permuted alike in q and k.
- The MLP. coda's w_gate_up interleaves rows (2j = gate_j, 2j + 1 = up_j), so the SwiGLU epilogue sees both halves
  of an output in one tile.
"""
from typing import Optional

import torch
from torch import Tensor

from coda.torch.modules import LlamaModel

# What coda's model computes; anything else in a config is refused, never ignored.
_SUPPORTED_ROPE = ("default", "llama3")


def _get(config, name: str, default=None):
    value = getattr(config, name, default)
    return default if value is None else value


def _rope(config) -> tuple[float, Optional[dict]]:
    """(base, rope_scaling) from a config: transformers 5 keeps both in rope_parameters, older versions in
    rope_theta and rope_scaling."""
    params = dict(_get(config, "rope_parameters", None) or _get(config, "rope_scaling", None) or {})
    base = float(params.pop("rope_theta", _get(config, "rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in _SUPPORTED_ROPE:
        raise ValueError(f"coda.torch.from_hf: rope type {kind!r} is not supported (only {', '.join(_SUPPORTED_ROPE)})")
    return base, (params if kind == "llama3" else None)


def _check(config):
    checks = {
        "hidden_act": (_get(config, "hidden_act", "silu"), "silu"),
        "attention_bias": (bool(_get(config, "attention_bias", False)), False),
        "mlp_bias": (bool(_get(config, "mlp_bias", False)), False),
        "pretraining_tp": (_get(config, "pretraining_tp", 1), 1),
    }
    for name, (value, wanted) in checks.items():
        if value != wanted:
            raise ValueError(f"coda.torch.from_hf: {name} = {value!r} is not supported (coda's layer has {wanted!r})")
    if _get(config, "attention_dropout", 0.0):
        raise ValueError("coda.torch.from_hf: attention_dropout is not supported (coda's attention has no dropout)")


def model_kwargs(config) -> dict:
    """LlamaModel's constructor arguments for a LlamaConfig (or any object with its attributes)."""
    _check(config)
    base, scaling = _rope(config)
    n_heads = config.num_attention_heads
    return dict(vocab=config.vocab_size, d=config.hidden_size, n_layers=config.num_hidden_layers, n_heads=n_heads,
                ffn=config.intermediate_size, eps=float(_get(config, "rms_norm_eps", 1e-6)), rope_base=base,
                n_kv_heads=_get(config, "num_key_value_heads", n_heads),
                head_dim=_get(config, "head_dim", config.hidden_size // n_heads), rope_scaling=scaling,
                tie_embeddings=bool(_get(config, "tie_word_embeddings", False)))


def _heads_to_pairs(w: Tensor, head_dim: int) -> Tensor:
    # HF's half-split rows of each head to coda's adjacent pairs: row half * hd/2 + j -> row 2j + half.
    n = w.shape[0] // head_dim
    return w.reshape(n, 2, head_dim // 2, -1).transpose(1, 2).reshape(w.shape)


def _pairs_to_heads(w: Tensor, head_dim: int) -> Tensor:
    n = w.shape[0] // head_dim
    return w.reshape(n, head_dim // 2, 2, -1).transpose(1, 2).reshape(w.shape)


def _strip_prefix(state_dict: dict) -> dict:
    # LlamaForCausalLM's keys ("model.layers.0...", "lm_head.weight"); a bare LlamaModel's lack "model.".
    if any(k.startswith("model.") for k in state_dict):
        return state_dict
    return {(k if k == "lm_head.weight" else "model." + k): v for k, v in state_dict.items()}


def convert_from_hf(state_dict: dict, kwargs: dict) -> dict:
    """coda LlamaModel state dict (parameter names of coda.torch.LlamaModel) from a Hugging Face one."""
    sd = _strip_prefix(state_dict)
    hd = kwargs["head_dim"]
    embed = sd["model.embed_tokens.weight"]
    out = {"embed.weight": embed, "head.norm": sd["model.norm.weight"],
           "head.weight": embed if kwargs["tie_embeddings"] else sd["lm_head.weight"]}
    for i in range(kwargs["n_layers"]):
        hf = f"model.layers.{i}."
        q, k, v = (sd[hf + f"self_attn.{n}_proj.weight"] for n in "qkv")
        gate, up = sd[hf + "mlp.gate_proj.weight"], sd[hf + "mlp.up_proj.weight"]
        out.update({
            f"layers.{i}.attn_norm": sd[hf + "input_layernorm.weight"],
            f"layers.{i}.w_qkv": torch.cat((_heads_to_pairs(q, hd), _heads_to_pairs(k, hd), v)),
            f"layers.{i}.w_o": sd[hf + "self_attn.o_proj.weight"],
            f"layers.{i}.mlp_norm": sd[hf + "post_attention_layernorm.weight"],
            f"layers.{i}.w_gate_up": torch.stack((gate, up), dim=1).reshape(2 * gate.shape[0], -1),
            f"layers.{i}.w_down": sd[hf + "mlp.down_proj.weight"],
        })
    return out


def convert_to_hf(tensors: dict, model: LlamaModel) -> dict:
    """Hugging Face LlamaForCausalLM state dict from tensors named as model's parameters (its weights, or their
    gradients)."""
    layer0 = model.layers[0]
    hd, q_rows, kv_rows = layer0.head_dim, layer0.n_heads * layer0.head_dim, layer0.n_kv_heads * layer0.head_dim
    out = {"model.embed_tokens.weight": tensors["embed.weight"], "model.norm.weight": tensors["head.norm"]}
    out["lm_head.weight"] = tensors["embed.weight" if model.tie_embeddings else "head.weight"]
    for i in range(len(model.layers)):
        hf, c = f"model.layers.{i}.", f"layers.{i}."
        q, k, v = tensors[c + "w_qkv"].split((q_rows, kv_rows, kv_rows))
        gate_up = tensors[c + "w_gate_up"]
        out.update({
            hf + "input_layernorm.weight": tensors[c + "attn_norm"],
            hf + "self_attn.q_proj.weight": _pairs_to_heads(q, hd),
            hf + "self_attn.k_proj.weight": _pairs_to_heads(k, hd),
            hf + "self_attn.v_proj.weight": v.contiguous(),
            hf + "self_attn.o_proj.weight": tensors[c + "w_o"],
            hf + "post_attention_layernorm.weight": tensors[c + "mlp_norm"],
            hf + "mlp.gate_proj.weight": gate_up[0::2].contiguous(),
            hf + "mlp.up_proj.weight": gate_up[1::2].contiguous(),
            hf + "mlp.down_proj.weight": tensors[c + "w_down"],
        })
    return out


def from_hf(model_or_config, state_dict: Optional[dict] = None, device=None, dtype=None, **overrides) -> LlamaModel:
    """A coda.torch.LlamaModel with a Hugging Face Llama's architecture and weights.

    model_or_config: a LlamaForCausalLM (its config and weights are taken; device and dtype default to its own) or
    a LlamaConfig (weights from state_dict, else freshly initialized). state_dict: a Hugging Face state dict
    (LlamaForCausalLM's keys, or a bare LlamaModel's), which overrides the model's own weights. overrides: other
    LlamaModel arguments (attention, store_logits, fp32_grad_accumulation, fp8).

    The returned model's loss is Hugging Face's: forward(input_ids, labels) scores position t against labels[t + 1]
    and skips labels equal to -100 (shift_labels=True, ignore_index=-100, unless overridden)."""
    config = getattr(model_or_config, "config", model_or_config)
    if state_dict is None and hasattr(model_or_config, "state_dict"):
        state_dict = model_or_config.state_dict()
    if state_dict is not None:
        reference = next(iter(state_dict.values()))
        device = device or reference.device
        dtype = dtype or reference.dtype
    kwargs = model_kwargs(config)
    model = LlamaModel(**kwargs, device=device, dtype=dtype or torch.bfloat16,
                       **{"shift_labels": True, "ignore_index": -100, **overrides})
    if state_dict is not None:
        converted = convert_from_hf(state_dict, kwargs)
        missing, unexpected = model.load_state_dict(converted, strict=False)
        # An FP8 model's delayed scales (Fp8Scaling buffers) start fresh: a Hugging Face checkpoint has none.
        missing = [k for k in missing if not (k.startswith("fp8_entry.") or ".fp8." in k)]
        if missing or unexpected:
            raise ValueError(f"coda.torch.from_hf: state dict does not fit the config: missing {missing}, "
                             f"unexpected {unexpected}")
    return model


def to_hf_state_dict(model: LlamaModel) -> dict:
    """model's weights as a Hugging Face LlamaForCausalLM state dict (load it with load_state_dict or save it with
    save_pretrained's state_dict argument). With tied embeddings lm_head.weight is the embedding's tensor."""
    return convert_to_hf({name: p.detach() for name, p in model.named_parameters(remove_duplicate=False)}, model)
