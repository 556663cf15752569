"""Modules built from coda's ops: LlamaDecoderLayer, the LM head with its loss, and LlamaModel.

The residual stream travels between layers as (x, h, rstd): each down-projection's epilogue writes the new x,
h = x * gamma of the next RMSNorm and the partials of its statistic, so no layer runs a separate RMSNorm."""
import math

import torch
import torch.nn as nn
from torch import Tensor

from coda.torch import ops, ops_lm_head  # noqa: F401  (registers torch.ops.coda.*)
from coda.torch.reference import rope_theta


def _grad_buffer(p: nn.Parameter, enabled: bool):
    """The f32 gradient buffer of `p` (p.main_grad) when fused accumulation is on, else None."""
    if not enabled:
        return None
    if torch.compiler.is_compiling():
        # The backward would write into a forward input, which AOTAutograd's joint graph cannot partition.
        raise RuntimeError("coda.torch: fp32_grad_accumulation works in eager mode only; under torch.compile "
                           "build the model with fp32_grad_accumulation=False (weight gradients stored in bf16)")
    if getattr(p, "main_grad", None) is None:
        p.main_grad = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
    return p.main_grad


class LlamaDecoderLayer(nn.Module):
    """A pre-norm LLaMA decoder layer in two coda ops: attention_block (QKV GEMM with RoPE, causal attention through
    PyTorch's SDPA kernels, out-projection with the residual add and the next RMSNorm's inputs) and mlp. forward((x, h, rstd), next_gamma, pos, seq_len) -> (x, h, rstd) of the next layer, where
    h = x * next_gamma. Weights: w_qkv [3d x d] (Q, K, V, heads contiguous; RoPE on adjacent column pairs),
    w_o [d x d], w_gate_up [2F x d] (rows 2j = gate_j, 2j+1 = up_j), w_down [d x F].

    fp32_grad_accumulation: the weight-gradient GEMMs add into p.main_grad (f32) instead of returning p.grad."""

    def __init__(self, d: int, n_heads: int, ffn: int, eps: float = 1e-5, rope_base: float = 10000.0,
                 attention: str = "sdpa", fp32_grad_accumulation: bool = False, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        if d % n_heads or (d // n_heads) % 2:
            raise ValueError(f"d = {d} must split into {n_heads} heads of even size")
        self.d, self.n_heads, self.ffn, self.eps, self.attention = d, n_heads, ffn, eps, attention
        self.fp32_grad_accumulation = fp32_grad_accumulation
        kw = dict(device=device, dtype=dtype)
        self.attn_norm = nn.Parameter(torch.ones(d, **kw))
        self.w_qkv = nn.Parameter(torch.empty(3 * d, d, **kw))
        self.w_o = nn.Parameter(torch.empty(d, d, **kw))
        self.mlp_norm = nn.Parameter(torch.ones(d, **kw))
        self.w_gate_up = nn.Parameter(torch.empty(2 * ffn, d, **kw))
        self.w_down = nn.Parameter(torch.empty(d, ffn, **kw))
        self.register_buffer("theta", rope_theta(d, n_heads, rope_base, device), persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        for w in (self.w_qkv, self.w_o, self.w_gate_up, self.w_down):
            nn.init.normal_(w, std=1.0 / math.sqrt(w.shape[1]))

    def forward(self, x: Tensor, h: Tensor, rstd: Tensor, next_gamma: Tensor, pos: Tensor, seq_len: int):
        acc = self.fp32_grad_accumulation
        x1, h1, rstd1, *_ = torch.ops.coda.attention_block(
            x, h, rstd, self.attn_norm, self.w_qkv, self.w_o, self.mlp_norm, pos, self.theta, self.eps, self.n_heads,
            seq_len, self.attention, _grad_buffer(self.w_qkv, acc), _grad_buffer(self.w_o, acc))
        x2, h2, rstd2, _ = torch.ops.coda.mlp(x1, h1, rstd1, self.mlp_norm, self.w_gate_up, self.w_down,
                                              next_gamma, self.eps, _grad_buffer(self.w_gate_up, acc),
                                              _grad_buffer(self.w_down, acc))
        return x2, h2, rstd2


class LlamaLMHead(nn.Module):
    """Final RMSNorm + LM head + mean cross-entropy, from the last layer's (x, h, rstd); h = x * norm.

    store_logits=False keeps no M x V logits: the forward keeps only the loss statistics and the backward
    recomputes the logits in the LM head GEMM, `chunk` rows at a time."""

    def __init__(self, d: int, vocab: int, fp32_grad_accumulation: bool = False, store_logits: bool = True,
                 chunk: int = 4096, device=None, dtype=torch.bfloat16):
        super().__init__()
        self.fp32_grad_accumulation = fp32_grad_accumulation
        self.store_logits, self.chunk = store_logits, chunk
        self.norm = nn.Parameter(torch.ones(d, device=device, dtype=dtype))
        self.weight = nn.Parameter(torch.empty(vocab, d, device=device, dtype=dtype))
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(d))

    def forward(self, x: Tensor, h: Tensor, rstd: Tensor, labels: Tensor) -> Tensor:
        labels = labels.to(torch.int32)
        buffer = _grad_buffer(self.weight, self.fp32_grad_accumulation)
        if self.store_logits:
            return torch.ops.coda.lm_head_ce(x, h, rstd, self.norm, self.weight, labels, buffer)[0]
        return torch.ops.coda.lm_head_ce_stats(x, h, rstd, self.norm, self.weight, labels, buffer, self.chunk)[0]


class LlamaModel(nn.Module):
    """Embedding, n_layers LlamaDecoderLayers and the LM head with its loss: forward(tokens, labels) -> mean
    cross-entropy; tokens and labels [batch x seq]. Train it with any torch optimizer. store_logits=False: the
    LM head keeps no logits (LlamaLMHead)."""

    def __init__(self, vocab: int, d: int, n_layers: int, n_heads: int, ffn: int, eps: float = 1e-5,
                 rope_base: float = 10000.0, attention: str = "sdpa", fp32_grad_accumulation: bool = False,
                 store_logits: bool = True, device=None, dtype=torch.bfloat16):
        super().__init__()
        self.eps = eps
        self.embed = nn.Embedding(vocab, d, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(d, n_heads, ffn, eps, rope_base, attention, fp32_grad_accumulation, device, dtype)
            for _ in range(n_layers))
        self.head = LlamaLMHead(d, vocab, fp32_grad_accumulation, store_logits, device=device, dtype=dtype)
        self._positions = {}

    @property
    def norm(self) -> Tensor:
        return self.head.norm

    @property
    def lm_head(self) -> Tensor:
        return self.head.weight

    def positions(self, batch: int, seq_len: int, device) -> Tensor:
        key = (batch, seq_len, str(device))
        pos = self._positions.get(key)
        if pos is None:
            pos = torch.arange(seq_len, dtype=torch.int32, device=device).repeat(batch)
            self._positions[key] = pos
        return pos

    def forward(self, tokens: Tensor, labels: Tensor) -> Tensor:
        b, s = tokens.shape
        x = self.embed(tokens).view(b * s, -1)
        pos = self.positions(b, s, tokens.device)
        h, rstd = torch.ops.coda.rms_stats(x, self.layers[0].attn_norm, self.eps)
        for i, layer in enumerate(self.layers):
            nxt = self.layers[i + 1].attn_norm if i + 1 < len(self.layers) else self.head.norm
            x, h, rstd = layer(x, h, rstd, nxt, pos, s)
        return self.head(x, h, rstd, labels.reshape(-1))
