"""What the FP8 tests share: a few optimizer steps of models side by side on one batch."""


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
