"""coda in PyTorch: the block epilogues as torch.ops.coda.* custom ops with autograd, and LLaMA modules built
from them. Importing this package registers the ops; CUDA tensors run coda kernels, CPU tensors run the fp64
reference (for tests). coda.torch.warm compiles a model's kernels in parallel before its first step;
coda.torch.from_hf and to_hf_state_dict convert Hugging Face Llama models and checkpoints."""
from coda.torch import fp8, ops, ops_fp8, ops_fp8_layer, ops_lm_head
from coda.torch.ops_fp8 import scaled_mm
from coda.torch.modules import LlamaDecoderLayer, LlamaLMHead, LlamaModel, grad_buffers
from coda.torch import reference
from coda.torch.warm import warm, warm_step
from coda.torch.hf import from_hf, to_hf_state_dict

__all__ = ["fp8", "ops", "ops_fp8", "ops_fp8_layer", "ops_lm_head", "reference", "scaled_mm", "LlamaDecoderLayer",
           "LlamaLMHead", "LlamaModel", "grad_buffers", "warm", "warm_step", "from_hf", "to_hf_state_dict"]
