"""coda in PyTorch: the block epilogues as torch.ops.coda.* custom ops with autograd, and LLaMA modules built
from them. Importing this package registers the ops; CUDA tensors run coda kernels, CPU tensors run the fp64
reference (for tests). coda.torch.warm compiles a model's kernels in parallel before its first step."""
from coda.torch import ops, ops_lm_head
from coda.torch.modules import LlamaDecoderLayer, LlamaLMHead, LlamaModel
from coda.torch import reference
from coda.torch.warm import warm, warm_step

__all__ = ["ops", "ops_lm_head", "reference", "LlamaDecoderLayer", "LlamaLMHead", "LlamaModel", "warm", "warm_step"]
