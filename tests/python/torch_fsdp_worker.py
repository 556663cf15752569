"""One rank of a two-process FSDP2 training step of coda.torch's LlamaModel, which test_torch_training.py launches
under torchrun: each rank runs the loss and gradients of its half of a batch and saves them for the test to compare
with one process on the whole batch. Also what that test shares with the ranks: the model, the batch, the sharding."""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

import coda.torch as ct  # noqa: E402
from coda.torch import _kernels  # noqa: E402

# Model and batch per device: tiny float64 shapes on the CPU (the fp64 reference path), test_torch_gpu.py's on CUDA.
CONFIGS = {
    "cpu": dict(model=dict(vocab=64, d=16, n_layers=3, n_heads=2, ffn=24, dtype=torch.float64), batch=4, seq=6),
    "cuda": dict(model=dict(vocab=1024, d=256, n_layers=2, n_heads=4, ffn=704, dtype=torch.bfloat16), batch=4,
                 seq=128),
}


def build(device: str, **kw) -> torch.nn.Module:
    """The device's model, the same weights in every process."""
    torch.manual_seed(0)
    return ct.LlamaModel(**{**CONFIGS[device]["model"], **kw}, device=device)


def batch(device: str, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and labels [batch x seq] of a step, the same in every process."""
    cfg = CONFIGS[device]
    gen = torch.Generator().manual_seed(100 + step)
    vocab = cfg["model"]["vocab"]
    tokens = torch.randint(0, vocab, (cfg["batch"], cfg["seq"]), generator=gen)
    labels = torch.randint(0, vocab, (cfg["batch"], cfg["seq"]), generator=gen)
    return tokens.to(device), labels.to(device)


def shard(model: torch.nn.Module, device: str) -> torch.nn.Module:
    """fully_shard on each decoder layer, then on the root (embedding, LM head), over all ranks. The mesh is
    explicit: FSDP2's default is the accelerator's, even for a CPU model on a machine with a GPU."""
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def full_grads(model: torch.nn.Module) -> dict:
    """Every parameter's whole gradient (a collective: every rank calls it)."""
    return {name: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
            for name, p in model.named_parameters()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(CONFIGS), required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", required=True, help="folder for rank<i>.pt")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        _kernels.POISON = True
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    try:
        model = shard(build(args.device), args.device)
        results = []
        for step in range(args.steps):
            tokens, labels = batch(args.device, step)
            rows = tokens.shape[0] // world
            mine = slice(rank * rows, (rank + 1) * rows)
            model.zero_grad(set_to_none=True)
            loss = model(tokens[mine], labels[mine])
            loss.backward()
            results.append({"loss": loss.detach().cpu(),
                            "grads": {k: v.cpu() for k, v in full_grads(model).items()}})
        torch.save(results, os.path.join(args.out, f"rank{rank}.pt"))
        # Both ranks done before either tears gloo down: a rank destroying its group while the other still used it
        # aborted ("terminate called without an active exception") in about one run in eight on 2 CPU cores.
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
