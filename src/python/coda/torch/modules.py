"""Modules built from coda's ops: LlamaDecoderLayer, the LM head with its loss, and LlamaModel.

The residual stream travels between layers as (x, h, rstd): each down-projection's epilogue writes the new x,
h = x * gamma of the next RMSNorm and the partials of its statistic, so no layer runs a separate RMSNorm."""
import math
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from coda.torch import ops, ops_fp8_layer, ops_lm_head  # noqa: F401  (registers ops)
from torch.utils.weak import WeakIdKeyDictionary

from coda.torch.fp8 import SCALE, Fp8Scaling, check_recipe
from coda.torch.reference import rope_theta


_NO_BUFFERS = ("coda.torch: under torch.compile, fp32_grad_accumulation needs each weight's main_grad to exist before "
               "the compiled step, on the weight's device: build the model with its device, or call "
               "coda.torch.grad_buffers(model) after moving it and before compiling")


@torch.compiler.disable(reason=_NO_BUFFERS)
def _no_buffers():
    # Run outside Dynamo, so that the error reaches the caller instead of becoming a graph break that quietly runs
    # the model eagerly.
    raise RuntimeError(_NO_BUFFERS)


def _recomputing() -> bool:
    """Whether this forward runs inside a backward: activation checkpointing's recomputation (eager mode only: Dynamo
    cannot trace the question)."""
    return not torch.compiler.is_compiling() and torch._C._current_graph_task_id() != -1


def _fits(buffer: Optional[Tensor], p: Tensor) -> bool:
    return buffer is not None and buffer.shape == p.shape and buffer.device == p.device


def _grad_buffer(p: nn.Parameter, enabled: bool, owner: Optional[nn.Module] = None):
    """The f32 gradient buffer of `p` (p.main_grad) when fused accumulation is on, else None. Allocated (zeros) when
    missing or left on another device by a move, in eager mode. A compiled step reads it as a graph input, which its
    backward writes into; a buffer the compiled region created itself would be a forward intermediate that the
    backward mutates, which AOTAutograd cannot partition: so under torch.compile it must exist already."""
    if not enabled:
        return None
    if owner is not None and isinstance(owner, FSDPModule):
        # FSDP2 reduce-scatters p.grad into the sharded parameter; a main_grad beside it would be neither reduced nor
        # sharded, and the optimizer would see no gradient.
        raise RuntimeError("coda.torch: fp32_grad_accumulation does not compose with FSDP2 (fully_shard): build the "
                           "model with fp32_grad_accumulation=False and let FSDP2's MixedPrecisionPolicy("
                           "reduce_dtype=torch.float32) keep the gradients in f32")
    if not _fits(getattr(p, "main_grad", None), p):
        if torch.compiler.is_compiling():
            _no_buffers()
        p.main_grad = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
    return p.main_grad


def grad_buffers(module: nn.Module) -> list[Tensor]:
    """Allocates the f32 main_grad buffers of every weight a coda.torch module with fp32_grad_accumulation adds its
    gradients into (zeros; kept where they exist on the weight's device already), and returns them. The modules do
    this when they are built; call it again after moving a model to another device, before torch.compile."""
    buffers = []
    for m in module.modules():
        for p in getattr(m, "accumulated_weights", lambda: ())():
            buffers.append(_grad_buffer(p, True, m))
    return buffers


def _norm_weight(w: Tensor) -> Tensor:
    """A norm weight read outside the module that owns it, as the gamma of h = x * gamma in the previous epilogue
    (no gradient flows there). Detached: an autograd edge into the weight from outside its module would hold its
    gradient back past FSDP2's reduce-scatter of that module. Under FSDP2 the owner may still be sharded here: its
    d elements are gathered."""
    w = w.detach()
    return w.full_tensor() if isinstance(w, DTensor) else w


class LlamaDecoderLayer(nn.Module):
    """A pre-norm LLaMA decoder layer in two coda ops: attention_block (QKV GEMM with RoPE, causal attention through
    PyTorch's SDPA kernels, out-projection with the residual add and the next RMSNorm's inputs) and mlp.
    forward((x, h, rstd), next_gamma, pos, seq_len) -> (x, h, rstd) of the next layer, where h = x * next_gamma.

    Weights: w_qkv [(n_heads + 2 n_kv_heads) hd x d] (Q, K, V, heads contiguous; RoPE on adjacent column pairs),
    w_o [d x n_heads hd], w_gate_up [2F x d] (rows 2j = gate_j, 2j+1 = up_j), w_down [d x F]. hd = head_dim, by
    default d / n_heads. n_kv_heads < n_heads is grouped-query attention (query head i reads KV head
    i // (n_heads / n_kv_heads)). rope_scaling: LLaMA 3.1's frequency rescaling, in Hugging Face's config form
    (reference.rope_frequencies).

    fp32_grad_accumulation: the weight-gradient GEMMs add into p.main_grad (f32) instead of returning p.grad.

    fp8: one of fp8_recipes.RECIPES ("tensorwise", "rowwise", ...; fp8_recipes' docstring says how each scales): the
    layer's forward and dgrad GEMMs run on FP8 operands, as one op (ops_fp8_layer); h arrives in e4m3 with its scales,
    and forward takes and returns them: forward((x, h, rstd), next_gamma, pos, seq_len, h_scale, fp8_out) -> (x, h,
    rstd, h_scale), h in e4m3 where fp8_out (else bf16, for a bf16 LM head). h_scale is the recipe's
    (Recipe.scales_shape): a delayed scale (0-dim), one per row (f32 [M]) or per row and 128 columns (f32 [ceil(d /
    128) x M]). Under delayed scales (tensorwise: self.fp8, an Fp8Scaling) the scales move on at each forward; each
    forward quantizes with a copy of them, which its backward dequantizes with (however many forwards ran in between),
    and a forward that activation checkpointing recomputes takes its first run's copy (_step_scales). fp8_history:
    the steps of amax they look back on; coda.torch.fp8.stats(model) reports their saturations. The other recipes keep
    no state (self.fp8 is None): every scale comes from its own tensor, block or row, so checkpointing is free to run
    a forward again. fp8_wgrad=True: the weight gradients too run in FP8 (the recipe's operands over the tokens, which
    must be a multiple of 16); by default they stay bf16.

    fp8_backward_accumulation: "fast" (default) sums the backward's per-tensor and row-wise FP8 GEMMs (dgrads, and
    the weight gradients with fp8_wgrad) in Hopper's FP8 accumulator, as torch._scaled_mm's use_fast_accum=True;
    "promoted" adds it into f32 every 128 k, as use_fast_accum=False and torchao's default for grad_input and
    grad_weight (docs/TORCH.md, "FP8 accumulation"). Block-wise GEMMs always promote. The forward's GEMMs are fast,
    as torchao's are."""

    def __init__(self, d: int, n_heads: int, ffn: int, eps: float = 1e-5, rope_base: float = 10000.0,
                 attention: str = "sdpa", fp32_grad_accumulation: bool = False, device=None,
                 dtype=torch.bfloat16, n_kv_heads: Optional[int] = None, head_dim: Optional[int] = None,
                 rope_scaling: Optional[dict] = None, fp8: Optional[str] = None, fp8_history: int = 16,
                 fp8_wgrad: bool = False, fp8_backward_accumulation: str = "fast"):
        super().__init__()
        check_recipe(fp8, fp8_wgrad, fp8_backward_accumulation)
        n_kv_heads = n_kv_heads or n_heads
        head_dim = head_dim or (d // n_heads if d % n_heads == 0 else 0)
        if head_dim <= 0 or head_dim % 2:
            raise ValueError(f"coda.torch: d = {d} with {n_heads} heads needs an even head_dim (got {head_dim})")
        if n_heads % n_kv_heads:
            raise ValueError(f"coda.torch: {n_heads} query heads must be a multiple of n_kv_heads = {n_kv_heads}")
        if attention == "none" and n_kv_heads != n_heads:
            raise ValueError("coda.torch: the attention-free stand-in ('none') needs n_kv_heads = n_heads")
        self.d, self.n_heads, self.ffn, self.eps, self.attention = d, n_heads, ffn, eps, attention
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim
        self.fp32_grad_accumulation = fp32_grad_accumulation
        kw = dict(device=device, dtype=dtype)
        self.attn_norm = nn.Parameter(torch.ones(d, **kw))
        self.w_qkv = nn.Parameter(torch.empty((n_heads + 2 * n_kv_heads) * head_dim, d, **kw))
        self.w_o = nn.Parameter(torch.empty(d, n_heads * head_dim, **kw))
        self.mlp_norm = nn.Parameter(torch.ones(d, **kw))
        self.w_gate_up = nn.Parameter(torch.empty(2 * ffn, d, **kw))
        self.w_down = nn.Parameter(torch.empty(d, ffn, **kw))
        self.register_buffer("theta", rope_theta(d, n_heads, rope_base, device, n_kv_heads, rope_scaling, head_dim),
                             persistent=False)
        self.fp8_recipe, self.fp8_wgrad = fp8, fp8_wgrad
        self.fp8_promoted_backward = fp8_backward_accumulation == "promoted"
        self.fp8 = Fp8Scaling(ops_fp8_layer.SLOTS, fp8_history, device) if fp8 == "tensorwise" else None
        # Each tensorwise forward's scales by its input x, for checkpointing's recomputation (_step_scales); an entry
        # goes with its x.
        self._first_run_scales = WeakIdKeyDictionary()
        self._compiled_update = False
        self.reset_parameters()
        if fp32_grad_accumulation:
            grad_buffers(self)

    def _apply(self, fn, recurse=True):
        # RoPE's angles stay f32 (the kernels read them so) through model.bfloat16(), .half() or .to(dtype), which
        # cast every floating buffer; a device move still moves them. The f32 values are kept, not cast back.
        theta = self.theta
        super()._apply(fn, recurse)
        if self.theta.dtype != torch.float32:
            self.theta = theta.to(self.theta.device)
        return self

    def __getstate__(self):
        # The first runs' scales belong to this layer's forwards in flight (and a weak dictionary does not pickle): a
        # copy (deepcopy, pickle) starts without them.
        return {k: v for k, v in self.__dict__.items() if k != "_first_run_scales"}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._first_run_scales = WeakIdKeyDictionary()

    def accumulated_weights(self) -> tuple:
        """The weights whose gradients add into main_grad (fp32_grad_accumulation)."""
        return (self.w_qkv, self.w_o, self.w_gate_up, self.w_down) if self.fp32_grad_accumulation else ()

    def reset_parameters(self):
        for w in (self.w_qkv, self.w_o, self.w_gate_up, self.w_down):
            nn.init.normal_(w, std=1.0 / math.sqrt(w.shape[1]))

    def _step_scales(self, x: Tensor) -> Tensor:
        """The delayed scales this forward quantizes with (tensorwise): it starts a step (Fp8Scaling.update) and
        copies them. A forward that activation checkpointing recomputes during the backward takes the copy its first
        run made, found by its input x, so it neither moves the scales on nor quantizes under later ones (another
        micro-batch's forward may have updated them since). Dynamo can trace neither that question nor the lookup:
        under torch.compile a checkpointed tensorwise layer runs eagerly (below)."""
        if _recomputing():
            scales = self._first_run_scales.get(x)
            if scales is None:
                raise RuntimeError("coda.torch: a tensorwise FP8 layer recomputed by activation checkpointing did not "
                                   "find the scales of its first run: checkpoint it with torch.utils.checkpoint's "
                                   "non-reentrant form (use_reentrant=False), which passes the same input back")
            return scales
        self.fp8.update(x.shape[0])
        scales = self.fp8.scales()
        if torch.compiler.is_compiling():
            # A Python-side write, which Dynamo replays after the graph. Inside a checkpointed region it refuses to
            # trace one, so that region runs eagerly (a graph break; with fullgraph=True, Dynamo's error), where the
            # recomputation is recognized. Traced, the region's recomputation would read the state this update wrote.
            self._compiled_update = True
        elif torch.is_grad_enabled():
            self._first_run_scales[x] = scales
        return scales

    def forward(self, x: Tensor, h: Tensor, rstd: Tensor, next_gamma: Tensor, pos: Tensor, seq_len: int,
                h_scale: Optional[Tensor] = None, fp8_out: bool = True):
        acc = self.fp32_grad_accumulation
        if self.fp8_recipe is not None and h_scale is None:
            raise ValueError("coda.torch: an FP8 layer needs h_scale, the scale its e4m3 h was written with")
        if self.fp8_recipe is not None:
            scales = self._step_scales(x) if self.fp8 is not None else None
            delayed = [scales, self.fp8.state] if scales is not None else []
            buffers = [_grad_buffer(w, acc, self) for w in (self.w_qkv, self.w_o, self.w_gate_up, self.w_down)]
            config = ops_fp8_layer.Config(self.fp8_recipe, self.eps, self.n_heads, seq_len, self.attention, fp8_out,
                                          self.fp8_wgrad, self.fp8_promoted_backward).text()
            x2, h2, rstd2, h2_scale, amax, *_ = torch.ops.coda.decoder_layer_fp8(
                x, [h, h_scale, rstd], [self.w_qkv, self.w_o, self.w_gate_up, self.w_down],
                [self.attn_norm, self.mlp_norm, next_gamma], [pos, self.theta], delayed, buffers, config)
            if scales is None:
                return x2, h2, rstd2, h2_scale
            if not _recomputing():
                self.fp8.record(amax)
            return x2, h2, rstd2, scales[SCALE, self.fp8.slot("h_next")]
        x1, h1, rstd1, *_ = torch.ops.coda.attention_block(
            x, [h, rstd], [self.w_qkv, self.w_o], [self.attn_norm, self.mlp_norm], [pos, self.theta],
            [_grad_buffer(self.w_qkv, acc, self), _grad_buffer(self.w_o, acc, self)],
            ops.AttentionConfig(self.eps, self.n_heads, seq_len, self.attention).text())
        x2, h2, rstd2, _ = torch.ops.coda.mlp(x1, h1, rstd1, self.mlp_norm, self.w_gate_up, self.w_down,
                                              next_gamma, self.eps, _grad_buffer(self.w_gate_up, acc, self),
                                              _grad_buffer(self.w_down, acc, self))
        return x2, h2, rstd2


class LlamaLMHead(nn.Module):
    """Final RMSNorm + LM head + mean cross-entropy, from the last layer's (x, h, rstd); h = x * norm.

    store_logits=False keeps no M x V logits: the forward keeps only the loss statistics and the backward
    recomputes the logits in the LM head GEMM, `chunk` rows at a time. ignore_index: rows with that label add
    nothing to the loss or the gradients, and the mean is over the other rows (F.cross_entropy's ignore_index)."""

    def __init__(self, d: int, vocab: int, fp32_grad_accumulation: bool = False, store_logits: bool = True,
                 chunk: int = 4096, device=None, dtype=torch.bfloat16, ignore_index: Optional[int] = None):
        super().__init__()
        self.fp32_grad_accumulation = fp32_grad_accumulation
        self.store_logits, self.chunk, self.ignore_index = store_logits, chunk, ignore_index
        self.norm = nn.Parameter(torch.ones(d, device=device, dtype=dtype))
        self.weight = nn.Parameter(torch.empty(vocab, d, device=device, dtype=dtype))
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(d))
        if fp32_grad_accumulation:
            grad_buffers(self)

    def accumulated_weights(self) -> tuple:
        return (self.weight,) if self.fp32_grad_accumulation else ()

    def forward(self, x: Tensor, h: Tensor, rstd: Tensor, labels: Tensor, weight: Optional[Tensor] = None) -> Tensor:
        """weight: the LM head's weight when another module owns it (tied embeddings), else this module's."""
        weight = self.weight if weight is None else weight
        labels = labels.to(torch.int32)
        buffer = _grad_buffer(weight, self.fp32_grad_accumulation, self)
        ignore = {} if self.ignore_index is None else {"ignore_index": self.ignore_index}
        if self.store_logits:
            return torch.ops.coda.lm_head_ce(x, h, rstd, self.norm, weight, labels, buffer, **ignore)[0]
        return torch.ops.coda.lm_head_ce_stats(x, h, rstd, self.norm, weight, labels, buffer, self.chunk,
                                               **ignore)[0]


class LlamaModel(nn.Module):
    """Embedding, n_layers LlamaDecoderLayers and the LM head with its loss: forward(tokens, labels) -> mean
    cross-entropy; tokens and labels [batch x seq]. Train it with any torch optimizer. store_logits=False: the
    LM head keeps no logits (LlamaLMHead).

    n_kv_heads, head_dim, rope_scaling, fp8, fp8_history, fp8_wgrad, fp8_backward_accumulation: as
    LlamaDecoderLayer. tie_embeddings: the LM
    head reads the embedding's weight; both gradients land in that one parameter (with fp32_grad_accumulation both add into its main_grad,
    the LM head's in its weight-gradient GEMM). ignore_index: labels to skip (LlamaLMHead). shift_labels: Hugging
    Face's convention, labels are the input ids: position t is scored against labels[t + 1] and the last position
    of each sequence is skipped (needs ignore_index)."""

    def __init__(self, vocab: int, d: int, n_layers: int, n_heads: int, ffn: int, eps: float = 1e-5,
                 rope_base: float = 10000.0, attention: str = "sdpa", fp32_grad_accumulation: bool = False,
                 store_logits: bool = True, device=None, dtype=torch.bfloat16, n_kv_heads: Optional[int] = None,
                 head_dim: Optional[int] = None, rope_scaling: Optional[dict] = None, tie_embeddings: bool = False,
                 ignore_index: Optional[int] = None, shift_labels: bool = False, fp8: Optional[str] = None,
                 fp8_history: int = 16, fp8_wgrad: bool = False, fp8_backward_accumulation: str = "fast"):
        super().__init__()
        check_recipe(fp8, fp8_wgrad, fp8_backward_accumulation)
        if shift_labels and ignore_index is None:
            raise ValueError("coda.torch: shift_labels needs an ignore_index for the last position of each sequence")
        self.eps, self.fp32_grad_accumulation, self.tie_embeddings = eps, fp32_grad_accumulation, tie_embeddings
        self.ignore_index, self.shift_labels = ignore_index, shift_labels
        self.embed = nn.Embedding(vocab, d, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(d, n_heads, ffn, eps, rope_base, attention, fp32_grad_accumulation, device, dtype,
                              n_kv_heads, head_dim, rope_scaling, fp8, fp8_history, fp8_wgrad,
                              fp8_backward_accumulation)
            for _ in range(n_layers))
        # The embedding entry's h, the first layer's FP8 operand.
        self.fp8_recipe = fp8
        self.fp8_entry = Fp8Scaling({"h": "e4m3"}, fp8_history, device) if fp8 == "tensorwise" else None
        self.head = LlamaLMHead(d, vocab, fp32_grad_accumulation, store_logits, device=device, dtype=dtype,
                                ignore_index=ignore_index)
        if tie_embeddings:
            self.head.weight = self.embed.weight
        self._positions = {}
        for path, m in self.named_modules():
            if isinstance(m, Fp8Scaling):
                m.label = path  # what warnings and coda.torch.fp8.stats call it
        if fp32_grad_accumulation:
            grad_buffers(self)

    def accumulated_weights(self) -> tuple:
        return (self.embed.weight,) if self.fp32_grad_accumulation else ()

    @property
    def norm(self) -> Tensor:
        return self.head.norm

    @property
    def lm_head(self) -> Tensor:
        return self.head.weight

    def positions(self, batch: int, seq_len: int, device) -> Tensor:
        if torch.compiler.is_compiling():
            # Made inside the compiled graph: a tensor cached across calls would be one of the graph's outputs,
            # which CUDA-graph replays (mode="reduce-overhead") overwrite.
            return torch.arange(seq_len, dtype=torch.int32, device=device).repeat(batch)
        key = (batch, seq_len, str(device))
        pos = self._positions.get(key)
        if pos is None:
            pos = torch.arange(seq_len, dtype=torch.int32, device=device).repeat(batch)
            self._positions[key] = pos
        return pos

    def embedding(self, tokens: Tensor) -> Tensor:
        """The embedding rows of tokens [batch x seq] as [batch * seq x d]."""
        weight = self.embed.weight
        if self.fp32_grad_accumulation:
            return torch.ops.coda.embedding(weight, tokens.reshape(-1), _grad_buffer(weight, True, self))
        return self.embed(tokens).view(tokens.numel(), -1)

    def targets(self, labels: Tensor) -> Tensor:
        """The label each row of the LM head is scored against, [batch * seq]."""
        if self.shift_labels:
            labels = torch.cat((labels[:, 1:], labels.new_full((labels.shape[0], 1), self.ignore_index)), dim=1)
        return labels.reshape(-1)

    def forward(self, tokens: Tensor, labels: Tensor) -> Tensor:
        b, s = tokens.shape
        x = self.embedding(tokens)
        pos = self.positions(b, s, tokens.device)
        if self.fp8_recipe is not None:
            return self._forward_fp8(x, pos, s, labels)
        h, rstd = torch.ops.coda.rms_stats(x, _norm_weight(self.layers[0].attn_norm), self.eps)
        for i, layer in enumerate(self.layers):
            nxt = self.layers[i + 1].attn_norm if i + 1 < len(self.layers) else self.head.norm
            x, h, rstd = layer(x, h, rstd, _norm_weight(nxt), pos, s)
        # Tied: the head gets the embedding's weight by name, so that torch.compile guards on tie_embeddings and never
        # runs an untied model's graph (two weights, two gradient buffers) on a tied one, whose buffers alias.
        return self.head(x, h, rstd, self.targets(labels), self.embed.weight if self.tie_embeddings else None)

    def _forward_fp8(self, x: Tensor, pos: Tensor, seq_len: int, labels: Tensor) -> Tensor:
        # The layers hand h over in e4m3 with its scale(s); the last one writes it in bf16 for the bf16 LM head.
        gamma = _norm_weight(self.layers[0].attn_norm)
        if self.fp8_entry is None:  # a recipe without delayed scales
            h, rstd, h_scale = torch.ops.coda.rms_stats_fp8(x, gamma, self.eps, None, self.fp8_recipe)
        else:
            self.fp8_entry.update(x.shape[0])
            h, rstd, amax = torch.ops.coda.rms_stats_fp8(x, gamma, self.eps, self.fp8_entry.inv_scale("h"))
            self.fp8_entry.record(amax)
            h_scale = self.fp8_entry.scale("h")
        for i, layer in enumerate(self.layers):
            last = i + 1 == len(self.layers)
            nxt = self.head.norm if last else self.layers[i + 1].attn_norm
            x, h, rstd, h_scale = layer(x, h, rstd, _norm_weight(nxt), pos, seq_len, h_scale, fp8_out=not last)
        return self.head(x, h, rstd, self.targets(labels), self.embed.weight if self.tie_embeddings else None)
