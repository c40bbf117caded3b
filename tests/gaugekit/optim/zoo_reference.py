"""Independent reference implementations of the zoo, written from the paper's definitions.

Plain loops over a list of matrices with Python-float hyperparameters, one function per rule:
``reference_step[name](state, params, grads, lr, **hp)`` updates ``params`` out of place and
returns the new list. They share no code with :mod:`gaugekit.optim` (own Newton–Schulz, own
matrix powers) so that agreement checks the conventions, not a shared helper.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _zeros(state: dict, key: str, params: list[Tensor]) -> list[Tensor]:
    return state.setdefault(key, [torch.zeros_like(p) for p in params])


def _tick(state: dict) -> int:
    state["t"] = state.get("t", 0) + 1
    return state["t"]


def gd(state, params, grads, lr):
    return [p - lr * g for p, g in zip(params, grads, strict=True)]


def momentum(state, params, grads, lr, momentum=0.9):
    bufs = _zeros(state, "b", params)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        bufs[i] = momentum * bufs[i] + g
        out.append(p - lr * bufs[i])
    return out


def adam(state, params, grads, lr, betas=(0.9, 0.999), eps=1e-8):
    b1, b2 = betas
    m, v, t = _zeros(state, "m", params), _zeros(state, "v", params), _tick(state)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        m[i] = b1 * m[i] + (1 - b1) * g
        v[i] = b2 * v[i] + (1 - b2) * g**2
        out.append(p - lr * (m[i] / (1 - b1**t)) / ((v[i] / (1 - b2**t)).sqrt() + eps))
    return out


def scalar_adam(state, params, grads, lr, betas=(0.9, 0.999), eps=1e-8):
    b1, b2 = betas
    m, v, t = _zeros(state, "m", params), _zeros(state, "v", params), _tick(state)
    for i, g in enumerate(grads):
        m[i] = b1 * m[i] + (1 - b1) * g
        v[i] = b2 * v[i] + (1 - b2) * g**2
    pooled = torch.cat([x.reshape(-1) for x in v]) / (1 - b2**t)
    s = pooled.mean().sqrt() + eps
    return [p - lr * (m[i] / (1 - b1**t)) / s for i, p in enumerate(params)]


def rmsprop(state, params, grads, lr, alpha=0.99, eps=1e-8):
    v = _zeros(state, "v", params)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        v[i] = alpha * v[i] + (1 - alpha) * g**2
        out.append(p - lr * g / (v[i].sqrt() + eps))
    return out


def signum(state, params, grads, lr, momentum=0.9):
    m = _zeros(state, "m", params)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        m[i] = momentum * m[i] + (1 - momentum) * g
        out.append(p - lr * torch.sign(m[i]))
    return out


def lion(state, params, grads, lr, betas=(0.9, 0.99)):
    b1, b2 = betas
    m = _zeros(state, "m", params)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        c = torch.sign(b1 * m[i] + (1 - b1) * g)
        m[i] = b2 * m[i] + (1 - b2) * g
        out.append(p - lr * c)
    return out


def adafactor(state, params, grads, lr, beta2=0.999, eps=1e-8):
    rows = state.setdefault("R", [torch.zeros(p.shape[0], dtype=p.dtype) for p in params])
    cols = state.setdefault("C", [torch.zeros(p.shape[1], dtype=p.dtype) for p in params])
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        rows[i] = beta2 * rows[i] + (1 - beta2) * (g**2).mean(dim=1)
        cols[i] = beta2 * cols[i] + (1 - beta2) * (g**2).mean(dim=0)
        v_hat = torch.outer(rows[i], cols[i]) / (rows[i].mean() + 1e-30)
        out.append(p - lr * g / (v_hat.sqrt() + eps))
    return out


def newton_schulz5(M: Tensor, eps: float = 1e-7) -> Tensor:
    """Quintic Newton–Schulz, (3.4445, −4.7750, 2.0315), 5 steps, tall matrices transposed."""
    X = M / (torch.linalg.norm(M) + eps)
    tall = X.shape[0] > X.shape[1]
    if tall:
        X = X.T
    for _ in range(5):
        A = X @ X.T
        X = 3.4445 * X - 4.7750 * (A @ X) + 2.0315 * (A @ (A @ X))
    return X.T if tall else X


def muon(state, params, grads, lr, momentum=0.9):
    bufs = _zeros(state, "b", params)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        bufs[i] = momentum * bufs[i] + g
        out.append(p - lr * newton_schulz5(bufs[i]))
    return out


def inverse_fourth_root(S: Tensor, damping: float) -> Tensor:
    vals, vecs = torch.linalg.eigh(S + damping * torch.eye(S.shape[0], dtype=S.dtype))
    return vecs @ torch.diag(vals.clamp(min=1e-6) ** -0.25) @ vecs.T


def shampoo(state, params, grads, lr, damping=1.0, update_freq=20):
    L = state.setdefault("L", [torch.zeros(p.shape[0], p.shape[0], dtype=p.dtype) for p in params])
    R = state.setdefault("R", [torch.zeros(p.shape[1], p.shape[1], dtype=p.dtype) for p in params])
    roots = state.setdefault("roots", [None] * len(params))
    t = _tick(state)
    out = []
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        L[i] = L[i] + g @ g.T
        R[i] = R[i] + g.T @ g
        if t % update_freq == 1 % update_freq:
            roots[i] = (inverse_fourth_root(L[i], damping), inverse_fourth_root(R[i], damping))
        out.append(p - lr * roots[i][0] @ g @ roots[i][1])
    return out


def scaled_gd(state, params, grads, lr, damping=1e-4, sequential=False):
    U, V = params
    G_U, G_V = grads

    def precondition(G, other):
        gram = other.T @ other
        lam = damping * (torch.trace(gram).item() / gram.shape[0] + 1e-30) + 1e-12
        return G @ torch.linalg.inv(gram + lam * torch.eye(gram.shape[0], dtype=gram.dtype))

    U_new = U - lr * precondition(G_U, V)
    V_new = V - lr * precondition(G_V, U_new if sequential else U)
    return [U_new, V_new]


def gram(state, params, grads, lr, power=0.5, damping=1e-6):
    out = []
    for p, g in zip(params, grads, strict=True):
        P = g @ g.T + damping * torch.eye(g.shape[0], dtype=g.dtype)
        vals, vecs = torch.linalg.eigh(P)
        out.append(p - lr * (vecs @ torch.diag(vals.clamp(min=1e-6) ** -power) @ vecs.T) @ g)
    return out


REFERENCE_STEP = {
    "gd": gd,
    "momentum": momentum,
    "adam": adam,
    "scalar_adam": scalar_adam,
    "rmsprop": rmsprop,
    "lion": lion,
    "signum": signum,
    "adafactor": adafactor,
    "muon": muon,
    "shampoo": shampoo,
    "scaled_gd": scaled_gd,
    "gram": gram,
}


def reference_run(name, params, loss, num_steps, **hp) -> list[Tensor]:
    """``num_steps`` of ``REFERENCE_STEP[name]`` from ``params`` on ``loss`` (autograd)."""
    state: dict = {}
    params = [p.detach().clone() for p in params]
    for _ in range(num_steps):
        leaves = [p.clone().requires_grad_(True) for p in params]
        grads = torch.autograd.grad(loss(*leaves), leaves)
        params = REFERENCE_STEP[name](state, params, list(grads), **hp)
    return params
