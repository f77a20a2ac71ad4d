"""A tiny NumPy MLP shared by the training examples (not an example itself).

The model is ``y_hat = tanh(x W1 + b1) W2 + b2`` with a mean-squared-error loss.
All parameters live in ONE flat vector (what PyTorch's DDP calls a bucket), so
that a single collective moves all of them; :func:`unflatten` gives views of it.
Gradients are returned as *sums* over the given samples, so that data-parallel
ranks can add their sums with an all-reduce and divide by the global count.
"""

from __future__ import annotations

import numpy as np

IN, HIDDEN, OUT = 8, 16, 1
SHAPES = {"W1": (IN, HIDDEN), "b1": (HIDDEN,), "W2": (HIDDEN, OUT), "b2": (OUT,)}
NPARAMS = sum(int(np.prod(s)) for s in SHAPES.values())


def make_data(samples: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The same synthetic regression data set on every rank (same seed)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, IN))
    y = np.sin(x @ rng.standard_normal((IN, OUT)))
    return x, y


def init_params(seed: int = 1) -> np.ndarray:
    """Initial parameters as one flat float64 vector (identical on every rank)."""
    return np.random.default_rng(seed).standard_normal(NPARAMS) * 0.3


def unflatten(flat: np.ndarray) -> dict[str, np.ndarray]:
    """Views of the flat vector with the shapes of W1, b1, W2, b2."""
    views, at = {}, 0
    for name, shape in SHAPES.items():
        n = int(np.prod(shape))
        views[name] = flat[at:at + n].reshape(shape)
        at += n
    return views


def loss_and_grad(flat: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """(sum of squared errors, its gradient) over the samples ``x, y``; both are sums, not means."""
    p = unflatten(flat)
    h = np.tanh(x @ p["W1"] + p["b1"])
    err = h @ p["W2"] + p["b2"] - y
    grad = np.zeros_like(flat)
    g = unflatten(grad)
    d_out = 2 * err                                  # d(sum err^2)/d y_hat
    g["W2"][...] = h.T @ d_out
    g["b2"][...] = d_out.sum(axis=0)
    d_h = (d_out @ p["W2"].T) * (1 - h * h)          # back through tanh
    g["W1"][...] = x.T @ d_h
    g["b1"][...] = d_h.sum(axis=0)
    return float((err * err).sum()), grad


def train_single(steps: int, lr: float, samples: int, momentum: float = 0.0) -> list[float]:
    """The reference: full-batch (momentum) SGD in one process; the mean loss before each step."""
    x, y = make_data(samples)
    w = init_params()
    v = np.zeros_like(w)
    losses = []
    for _ in range(steps):
        loss, grad = loss_and_grad(w, x, y)
        losses.append(loss / samples)
        v = momentum * v + grad / samples
        w = w - lr * v
    return losses
