"""coda in PyTorch: the block epilogues as torch.ops.coda.* custom ops with autograd, and LLaMA modules built
from them. Importing this package registers the ops; CUDA tensors run coda kernels, CPU tensors run the fp64
reference (for tests)."""
from coda.torch import ops, ops_lm_head
from coda.torch.modules import LlamaDecoderLayer, LlamaLMHead, LlamaModel
from coda.torch import reference

__all__ = ["ops", "ops_lm_head", "reference", "LlamaDecoderLayer", "LlamaLMHead", "LlamaModel"]
