"""What the FP8 layer tests share: exact test values, the relative error they report, and a few optimizer steps of
models side by side on one batch."""
import torch


def grid(*shape, seed=0, scale=1.0):
    """Multiples of 1/64 in [-1, 1) times scale, float64: exact in bf16 for small scales."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-64, 64, shape, generator=g).double() / 64 * scale


def rel(actual, expected):
    """||actual - expected|| / ||expected||, in float64."""
    actual, expected = actual.detach().double(), expected.detach().double()
    return float((actual - expected).norm() / expected.norm().clamp_min(1e-30))


def train_side_by_side(models: dict, tokens, labels, lr: float, steps: int, optimizer) -> dict:
    """{name: the loss of each of `steps` steps} of each model of `models` ({name: model}), each with its own
    optimizer(parameters, lr=lr), on the same batch every step."""
    losses = {}
    for name, model in models.items():
        opt = optimizer(model.parameters(), lr=lr)
        losses[name] = []
        for _ in range(steps):
            opt.zero_grad()
            loss = model(tokens, labels)
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    return losses
