r"""LoRA: the gauge you fine-tune every day. Does a gauge-equivalent split of the same adapter
end in a different fine-tuned model, and which optimizer fine-tunes best?

LoRA trains ``W₀ + s B A`` with ``W₀`` frozen, ``A`` of shape ``(r, in)`` and ``B`` ``(out, r)``:
the paper's factored weight ``U Vᵀ`` with ``U = B``, ``V = Aᵀ``. The product, hence the model, is
unchanged by ``(A, B) → (R⁻¹A, B R)`` for every invertible ``R``: the gauge group is ``GL(r)``,
its orthogonal part ``O(r)`` (``R = Q``: ``(QᵀA, B Q)``).

The experiment.

1. **Pretraining** (part ``pretrain``, one run): the language-model chapter's causal character
   transformer (:class:`~gaugebook.lora.lora_model.CharTransformer`) on tiny-shakespeare with a
   vocabulary that covers both texts (:func:`~gaugebook.engine.texts.joint_vocab`), Adam at the
   rate chapter 9 selected for Adam (:data:`PRETRAIN_LR`). Its weights are computed once per
   process and kept in a cache file (:func:`pretrained_params`); every fine-tuning record
   carries the SHA-256 of the weights it started from.
2. **Fine-tuning** (part ``tuned``): ``peft`` wraps the attention projections ``q, k, v, o`` of
   every block with rank-``r`` adapters (``lora_alpha = r``, so ``s = 1``; no dropout); only the
   adapters train, on the Python language reference's topic pages
   (:data:`~gaugebook.engine.texts.PYTHON_REFERENCE`), held-out loss on its last 10 %.
   Initialisations (seeded, drawn here, not by ``peft``'s global generator): ``zero`` is LoRA's
   standard ``A ~ U(±1/√in)`` (``peft``'s kaiming-uniform), ``B = 0``; ``random`` draws ``B ~
   U(±1/√r)`` too and folds the initial product into the frozen weight (``W₀ ← W₀ − s B₀A₀``), so
   both start at the pretrained function.
3. **Optimizers** on the adapters (:func:`make_optimizer`): ``adamw`` (torch's AdamW at its
   defaults: β = (0.9, 0.999), ε = 1e-8, decay 0.01); ``lora_rite`` (``pytorch_optimizer``'s
   LoRA-RITE, its defaults except ``update_skipping = 0``: :data:`LORA_RITE_OPTIONS`);
   ``scalar_adam`` (shared-scale Adam); ``muon`` (Muon on every adapter, momentum 0.95,
   Nesterov, five Newton–Schulz steps, the rate scaled by ``max(1, out/in)^½``); ``scaled_gd``
   (ScaledGD on each ``(A, B)`` pair, its default relative damping). Each on its own grid
   (:data:`LR_GRIDS`): selection seeds, the rate with the lowest mean final held-out loss
   (:func:`~gaugebook.engine.selection.select_rate`), then fresh seeds at that rate.
4. **Twins** of every fresh run, under both initialisations: an orthogonal gauge twin
   (``R = Q`` Haar), a general one (``R`` of condition number :data:`CONDITION_NUMBER`) and a
   noise twin (``A, B + σ N(0, 1)``, σ = :data:`NOISE_SCALE`; a factor that is zero, LoRA's
   ``B = 0``, stays zero, as it does in the gauge twins: at ``B = 0`` the gradient of ``A`` is
   exactly zero, and a rule that normalises its step would turn a 1e-7 nudge of ``B`` into a
   full step of ``A``, a discontinuity, not chaos), each checked before training to
   compute the same function as its base (gauge twins: to round-off; the check raises
   otherwise), and trained on the identical batches. A twin's record gives the drift of every
   adapter's ``s B A`` from its base's at the end, the relative distance of their held-out
   logits, and its own held-out loss.

Every run of one optimizer is one batch of the sweep (the selection is trained again when a
fresh run is missing); fine-tuning runs one model at a time, and every record carries its
training loop's milliseconds per step.

5. **Timing** (part ``timing``): the comparison at equal time rests on re-timings of identical
   work, not on one run's clock. Each optimizer fine-tunes one model alone for
   ``timing_steps`` steps, ``timing_rounds`` times; the rounds interleave the optimizers in a
   new seeded order each round (:func:`timing_order`), so that a slow spell of the machine
   falls on all of them alike, and each record gives its milliseconds per step.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import time
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.functional import cross_entropy

from gaugebook.engine import collection
from gaugebook.engine.records import canonical_json
from gaugebook.engine.scales import ScaleConfig, Scales
from gaugebook.engine.selection import select_rate
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.engine.texts import Text, joint_vocab, load_text
from gaugebook.engine.transformer import (
    TransformerShape,
    char_lm_batches,
    init_params,
    is_collapsed,
)
from gaugebook.lora.lora_model import CharTransformer
from gaugekit.audit.lora import (
    LoraPair,
    LoraTwinAuditResult,
    audit_lora_twins,
    find_lora_pairs,
    lora_param_groups,
    lora_parameters,
    lora_products,
    lora_twin,
    products_drift,
)
from gaugekit.gauge import relative_distance

NAME = "lora"

METHODS: tuple[str, ...] = ("adamw", "lora_rite", "scalar_adam", "muon", "scaled_gd")
METHOD_LABELS: dict[str, str] = {
    "adamw": "AdamW", "lora_rite": "LoRA-RITE", "scalar_adam": "Shared-scale Adam",
    "muon": "Muon", "scaled_gd": "ScaledGD",
}
#: The gauge group each rule keeps on an (A, B) pair, by its update rule (the twins check it):
#: ``"GL(r)"``, ``"O(r)"`` or ``None``.
KEEPS: dict[str, str | None] = {
    "adamw": None, "lora_rite": "GL(r)", "scalar_adam": "O(r)", "muon": "O(r)",
    "scaled_gd": "O(r)",
}
_ADAM_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
_UNIT_GRID = (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3)
#: Each optimizer's learning-rate grid (half-decade steps).
#: A grid whose choice fell on its edge in the paper-scale selection was extended beyond it and
#: selected again (AdamW by 0.1; LoRA-RITE and shared-scale Adam by 0.1 and 0.3; ScaledGD by 1
#: and 3, then by 10 and 30).
LR_GRIDS: dict[str, tuple[float, ...]] = {
    "adamw": (*_ADAM_GRID, 0.1), "lora_rite": (*_ADAM_GRID, 0.1, 0.3),
    "scalar_adam": (*_ADAM_GRID, 0.1, 0.3),
    "muon": _UNIT_GRID, "scaled_gd": (*_UNIT_GRID, 1.0, 3.0, 10.0, 30.0),
}
#: LoRA-RITE's settings beside the rate: its defaults, but no update skipping (at its default
#: threshold 1.0 it skips every update whose RMS before magnification is above 1).
LORA_RITE_OPTIONS: dict[str, Any] = {"update_skipping": 0.0}
INITS: tuple[str, ...] = ("zero", "random")
TWIN_KINDS: tuple[str, ...] = ("orthogonal", "general", "noise")
CONDITION_NUMBER = 4.0
NOISE_SCALE = 1e-7
GAUGE_SEED = 777
NOISE_SEED = 888
#: Adam's rate selected by the language-model chapter at this size (``results/language_model``).
PRETRAIN_LR = 1e-2


def make_optimizer(method: str, pairs: Sequence[LoraPair], lr: float) -> torch.optim.Optimizer:
    """The optimizer ``method`` on the adapters ``pairs`` at rate ``lr`` (module doc, item 3)."""
    params = lora_parameters(pairs)
    if method == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    if method == "lora_rite":
        from pytorch_optimizer import LoRARite

        return LoRARite(params, lr=lr, **LORA_RITE_OPTIONS)
    if method == "scalar_adam":
        from gaugekit.optim import SharedScaleAdam

        return SharedScaleAdam(params, lr=lr)
    if method == "muon":
        from gaugekit.optim import Muon

        return Muon(params, lr=lr, momentum=0.95, nesterov=True, adjust_lr_fn="original")
    if method == "scaled_gd":
        from gaugekit.optim import ScaledGD

        return ScaledGD(lora_param_groups(pairs), lr=lr, layout="AB")
    raise ValueError(f"Invalid method: {method!r}; expected one of {METHODS}")


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoraConfig(ScaleConfig):
    """The experiment at one scale (:class:`~gaugebook.engine.scales.ScaleConfig`)."""

    scale: str
    pretrain: Mapping[str, Any]
    finetune: Mapping[str, Any]
    model: TransformerShape
    lora: Mapping[str, Any]
    num_steps: int
    checkpoints: tuple[int, ...]
    grids: Mapping[str, tuple[float, ...]]
    selection_seeds: tuple[int, ...]
    fresh_seeds: tuple[int, ...]
    persist_records: bool
    timing_steps: int = 100
    timing_rounds: int = 5
    dtype: str = "float32"

    @property
    def part_names(self) -> tuple[str, ...]:
        return ("pretrain", "tuned", "timing")

    def _config(self, method: str, **extra: Any) -> dict[str, Any]:
        return {"kind": "lora", "pretrain": dict(self.pretrain), "finetune": dict(self.finetune),
                "model": self.model.to_config(), "lora": dict(self.lora), "method": method,
                "num_steps": self.num_steps, "checkpoints": list(self.checkpoints),
                "dtype": self.dtype, **extra}

    def twins(self) -> list[dict[str, Any]]:
        return [{"kind": "base"},
                {"kind": "orthogonal", "seed": GAUGE_SEED},
                {"kind": "general", "seed": GAUGE_SEED, "condition_number": CONDITION_NUMBER},
                {"kind": "noise", "seed": NOISE_SEED, "scale": NOISE_SCALE}]

    def specs(self, part: str) -> list[RunSpec]:
        if part == "pretrain":
            config = {"kind": "lora_pretrain", "pretrain": dict(self.pretrain),
                      "finetune": dict(self.finetune), "model": self.model.to_config(),
                      "dtype": self.dtype}
            return [RunSpec(NAME, part, config, {"init": int(self.pretrain["init_seed"])})]
        if part == "timing":
            seed = self.fresh_seeds[0]
            # the time of a step does not depend on the rate: each grid's third one
            return [RunSpec(NAME, part, {
                **self._config(m, role="timing", lr=self.grids[m][min(2, len(self.grids[m]) - 1)],
                               init="zero", init_seed=seed, twin={"kind": "base"}, round=k),
                "num_steps": self.timing_steps, "checkpoints": [self.timing_steps]},
                {"init": seed}) for k in range(self.timing_rounds) for m in METHODS]
        if part != "tuned":
            raise ValueError(f"Invalid part: {part!r}; expected one of {self.part_names}")
        out: list[RunSpec] = []
        for m in METHODS:
            out += [RunSpec(NAME, part, self._config(m, role="select", lr=lr, init="zero",
                                                     init_seed=seed, twin={"kind": "base"}),
                            {"init": seed})
                    for lr in self.grids[m] for seed in self.selection_seeds]
            for init in INITS:
                for seed in self.fresh_seeds:
                    for twin in self.twins():
                        config = self._config(m, role="fresh", lr="selected",
                                              grid=list(self.grids[m]),
                                              selection_seeds=list(self.selection_seeds),
                                              init=init, init_seed=seed, twin=twin)
                        seeds = {"init": seed, **({"twin": twin["seed"]} if "seed" in twin
                                                  else {})}
                        out.append(RunSpec(NAME, part, config, seeds))
        return out


def _checkpoints(num_steps: int, every: int) -> tuple[int, ...]:
    return tuple(sorted({0, 1, 10, *range(every, num_steps + 1, every), num_steps}))


def _paper_config() -> LoraConfig:
    pretrain = {"text": "tinyshakespeare", "max_chars": None, "seq_len": 128, "batch_size": 16,
                "num_steps": 2000, "lr": PRETRAIN_LR, "val_windows": 128, "data_seed": 1234,
                "init_seed": 0}
    finetune = {"text": "python_reference", "max_chars": None, "batch_size": 16,
                "val_windows": 128, "data_seed": 4321}
    model = TransformerShape(vocab=104, seq_len=128, d_model=64, num_heads=4, num_layers=2,
                             d_mlp=256, num_classes=104, causal=True, last_only=False)
    lora = {"r": 4, "alpha": 4, "targets": ["q", "k", "v", "o"]}
    return LoraConfig("paper", pretrain, finetune, model, lora, 400, _checkpoints(400, 50),
                      LR_GRIDS, (1, 2), (3, 4, 5), True)


def _quick_config() -> LoraConfig:
    pretrain = {"text": "auto", "max_chars": 20_000, "seq_len": 16, "batch_size": 4,
                "num_steps": 60, "lr": PRETRAIN_LR, "val_windows": 8, "data_seed": 1234,
                "init_seed": 0}
    finetune = {"text": "auto_python_reference", "max_chars": 20_000, "batch_size": 4,
                "val_windows": 8, "data_seed": 4321}
    vocab = len(_vocab(pretrain, finetune))
    model = TransformerShape(vocab=vocab, seq_len=16, d_model=16, num_heads=2, num_layers=1,
                             d_mlp=32, num_classes=vocab, causal=True, last_only=False)
    lora = {"r": 2, "alpha": 2, "targets": ["q", "k", "v", "o"]}
    grids = {m: g[2:4] for m, g in LR_GRIDS.items()}
    return LoraConfig("quick", pretrain, finetune, model, lora, 20, _checkpoints(20, 10), grids,
                      (1,), (3, 4), False, timing_steps=5, timing_rounds=3)


get_config = Scales(paper=_paper_config, quick=_quick_config)


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def _raw(spec: Mapping[str, Any]) -> Text:
    return load_text(spec["text"], max_chars=spec.get("max_chars"))


def _vocab(pretrain: Mapping[str, Any], finetune: Mapping[str, Any]) -> str:
    return joint_vocab(_raw(pretrain), _raw(finetune))


@dataclass(frozen=True)
class TextTask:
    """One text's pre-drawn training batches and held-out windows (last 10 %)."""

    name: str
    xs: Tensor
    ys: Tensor
    val: tuple[Tensor, Tensor]


@lru_cache(maxsize=8)
def _task(spec_json: str, vocab: str, seq_len: int, num_steps: int) -> TextTask:
    import json

    spec = json.loads(spec_json)
    text = load_text(spec["text"], max_chars=spec.get("max_chars"), vocab=vocab)
    cut = int(0.9 * text.ids.numel())
    seed = int(spec["data_seed"])
    xs, ys = char_lm_batches(text.ids[:cut], num_steps=max(num_steps, 1),
                             batch_size=int(spec["batch_size"]), seq_len=seq_len, seed=seed)
    vx, vy = char_lm_batches(text.ids[cut:], num_steps=1, batch_size=int(spec["val_windows"]),
                             seq_len=seq_len, seed=seed + 1)
    return TextTask(text.name, xs, ys, (vx[0], vy[0]))


def text_task(spec: Mapping[str, Any], vocab: str, seq_len: int, num_steps: int) -> TextTask:
    """The batches of text ``spec`` (``pretrain`` or ``finetune``) in vocabulary ``vocab``."""
    return _task(canonical_json(dict(spec)), vocab, seq_len, num_steps)


def _loss(model: nn.Module, tokens: Tensor, targets: Tensor) -> Tensor:
    logits = model(tokens)
    return cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def evaluate(model: nn.Module, data: tuple[Tensor, Tensor], device: torch.device | str = "cpu"
             ) -> dict[str, float]:
    """Loss and next-character accuracy on ``data``."""
    x, y = (t.to(device) for t in data)
    logits = model(x)
    loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    acc = (logits.argmax(-1) == y).float().mean()
    return {"loss": float(loss), "acc": float(acc)}


# --------------------------------------------------------------------------------------------
# pretraining
# --------------------------------------------------------------------------------------------


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "gaugebook" / "lora_pretrained"


def weights_sha256(params: Mapping[str, Tensor]) -> str:
    """SHA-256 of the weights' bytes in name order (which pretrained model a record used)."""
    h = hashlib.sha256()
    for name in sorted(params):
        h.update(name.encode())
        h.update(params[name].detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def _pretrain(config: Mapping[str, Any], device: torch.device
              ) -> tuple[dict[str, Tensor], dict[str, Any]]:
    pre, fine = config["pretrain"], config["finetune"]
    shape = TransformerShape(**config["model"])
    vocab = _vocab(pre, fine)
    steps = int(pre["num_steps"])
    task = text_task(pre, vocab, shape.seq_len, steps)
    g = torch.Generator().manual_seed(int(pre["init_seed"]))
    model = CharTransformer.from_params(shape, init_params(shape, generator=g)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=float(pre["lr"]))
    t0 = time.perf_counter()
    for step in range(steps):
        loss = _loss(model, task.xs[step].to(device), task.ys[step].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    wall = time.perf_counter() - t0
    target = text_task(fine, vocab, shape.seq_len, 1)
    ev, ev_target = evaluate(model, task.val, device), evaluate(model, target.val, device)
    metrics = {"val_loss": ev["loss"], "val_acc": ev["acc"], "target_val_loss": ev_target["loss"],
               "target_val_acc": ev_target["acc"], "final_train_loss": float(loss.detach()),
               "ms_per_step": 1000 * wall / max(steps, 1), "text_used": task.name,
               "target_text_used": target.name, "vocab_size": len(vocab)}
    return {k: v.cpu() for k, v in model.to_params().items()}, metrics


_PRETRAINED: dict[str, tuple[dict[str, Tensor], dict[str, Any]]] = {}


def pretrained_params(config: Mapping[str, Any], device: torch.device | str = "cpu"
                      ) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """The pretrained weights of ``config`` (its ``pretrain``, ``finetune`` and ``model``) and
    the pretraining's metrics: from this process's memory, else the cache file (keyed by the
    pretraining's config), else trained now on ``device`` and cached (on the CPU). The metrics
    say which (``source``)."""
    key_config = {k: config[k] for k in ("pretrain", "finetune", "model")}
    key = hashlib.sha256(canonical_json(key_config).encode()).hexdigest()[:16]
    if key in _PRETRAINED:
        return _PRETRAINED[key]
    path = _cache_dir() / f"{key}.pt"
    if path.is_file():
        try:
            saved = torch.load(path, weights_only=True)
            params, metrics = saved["params"], {**saved["metrics"], "source": "cache"}
            if weights_sha256(params) == saved["sha256"]:
                _PRETRAINED[key] = (params, metrics)
                return _PRETRAINED[key]
        except Exception:  # noqa: BLE001 - a damaged cache file is trained again
            pass
    params, metrics = _pretrain(config, torch.device(device))
    sha = weights_sha256(params)
    metrics |= {"weights_sha256": sha}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"params": params, "metrics": metrics, "sha256": sha}, path)
    except OSError:
        pass  # no cache: the next process trains again (deterministically)
    _PRETRAINED[key] = (params, {**metrics, "source": "trained"})
    return _PRETRAINED[key]


# --------------------------------------------------------------------------------------------
# fine-tuning
# --------------------------------------------------------------------------------------------


def lora_model(config: Mapping[str, Any], init: str, seed: int) -> tuple[nn.Module, list[LoraPair]]:
    """The pretrained model wrapped by ``peft`` with fresh adapters: initialisation ``init``
    (``"zero"`` or ``"random"``, module doc) drawn from a generator seeded ``seed``."""
    with warnings.catch_warnings():  # tqdm's notebook check, when peft imports it in a kernel
        warnings.filterwarnings("ignore", message="IProgress not found")
        import peft

    if init not in INITS:
        raise ValueError(f"Invalid init: {init!r}; expected one of {INITS}")
    shape = TransformerShape(**config["model"])
    params, _ = pretrained_params(config)
    base = CharTransformer.from_params(shape, params)
    lora = config["lora"]
    peft_config = peft.LoraConfig(r=int(lora["r"]), lora_alpha=int(lora["alpha"]),
                                  target_modules=list(lora["targets"]), lora_dropout=0.0)
    model = peft.get_peft_model(base, peft_config)
    pairs = find_lora_pairs(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pair in pairs:
            r, fan_in = pair.A.shape
            pair.A.copy_((torch.rand(pair.A.shape, generator=g) * 2 - 1) / math.sqrt(fan_in))
            if init == "zero":
                pair.B.zero_()
            else:
                pair.B.copy_((torch.rand(pair.B.shape, generator=g) * 2 - 1) / math.sqrt(r))
        if init == "random":
            for name, module in model.named_modules():
                if hasattr(module, "lora_A") and hasattr(module, "base_layer"):
                    pair = next(p for p in pairs if p.name == name)
                    module.base_layer.weight -= pair.scaling * pair.B @ pair.A
    return model, pairs


def make_lora_twin(model: nn.Module, pairs: Sequence[LoraPair], twin: Mapping[str, Any]
                   ) -> tuple[nn.Module, list[LoraPair]]:
    """A copy of ``model`` with its adapters replaced by the twin ``twin`` (module doc, item 4):
    the library's :func:`~gaugekit.audit.lora.lora_twin`, or a plain copy for the base."""
    kind = twin["kind"]
    if kind == "base":
        twin_model = copy.deepcopy(model)
    elif kind in TWIN_KINDS:
        twin_model = lora_twin(model, kind, seed=int(twin["seed"]),
                               scale=float(twin.get("scale", NOISE_SCALE)),
                               condition_number=float(twin.get("condition_number",
                                                               CONDITION_NUMBER)))
    else:
        raise ValueError(f"Invalid twin kind: {kind!r}; expected 'base' or one of {TWIN_KINDS}")
    return twin_model, find_lora_pairs(twin_model)


#: A gauge twin's held-out logits may differ from its base's by at most this (relative, float32)
#: before training; the product ``B A`` is recomputed in another order, nothing more.
FUNCTION_TOLERANCE = 1e-5


def _rel(a: Tensor, b: Tensor) -> float:
    return relative_distance(a.flatten(), b.flatten()).item()


@dataclass
class Trained:
    """A fine-tuned model and what its record needs: its held-out logits at the end and its
    adapters' products ``s B A`` at every checkpoint (a twin's drift curve reads them)."""

    model: nn.Module
    result: RunResult
    val_logits: Tensor
    products: dict[int, dict[str, Tensor]]


def finetune(config: Mapping[str, Any], method: str, lr: float, init: str, seed: int,
             twin: Mapping[str, Any], base: Trained | None = None, *,
             device: torch.device | str = "cpu") -> Trained:
    """One fine-tuning run: the adapters of (init, seed), as twin ``twin`` of them, trained by
    ``method`` at ``lr``. A twin's ``base`` (the trained base run) gives its drifts."""
    shape = TransformerShape(**config["model"])
    vocab = _vocab(config["pretrain"], config["finetune"])
    steps = int(config["num_steps"])
    task = text_task(config["finetune"], vocab, shape.seq_len, steps)
    source = text_task(config["pretrain"], vocab, shape.seq_len, 1)
    model0, pairs0 = lora_model(config, init, seed)
    model, pairs = make_lora_twin(model0, pairs0, twin)
    before = 0.0
    with torch.no_grad():
        if twin["kind"] != "base":
            before = _rel(model(task.val[0]), model0(task.val[0]))
    model.to(device)
    if twin["kind"] in ("orthogonal", "general") and not before <= FUNCTION_TOLERANCE:
        raise RuntimeError(f"gauge twin {twin} changes the function before training: relative "
                           f"logit distance {before:.3g} > {FUNCTION_TOLERANCE:g}")
    del model0, pairs0
    opt = make_optimizer(method, pairs, lr)
    checkpoints = set(int(c) for c in config["checkpoints"])
    curves: dict[str, list[Any]] = {"step": [], "val_loss": [], "train_loss": []}
    if base is not None:
        curves["adapter_drift"] = []
    products: dict[int, dict[str, Tensor]] = {}
    train_loss, wall, finite = float("nan"), 0.0, True
    for step in range(steps + 1):
        if step in checkpoints:
            ev = evaluate(model, task.val, device)
            curves["step"].append(step)
            curves["val_loss"].append(ev["loss"])
            curves["train_loss"].append(train_loss)
            products[step] = lora_products(model)
            if base is not None:
                drift = products_drift(base.products[step], products[step])
                curves["adapter_drift"].append(sum(drift.values()) / len(drift))
            if not math.isfinite(ev["loss"]):
                finite = False
                break
        if step == steps:
            break
        t0 = time.perf_counter()
        loss = _loss(model, task.xs[step].to(device), task.ys[step].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        train_loss = float(loss.detach())  # waits for the step: the timing is the step's
        wall += time.perf_counter() - t0
    with torch.no_grad():
        val_logits = model(task.val[0].to(device))
    ev = evaluate(model, task.val, device)
    source_ev = evaluate(model, source.val, device)
    done = curves["step"][-1]
    metrics: dict[str, Any] = {
        "lr": lr, "twin_kind": twin["kind"], "val_loss": ev["loss"], "val_acc": ev["acc"],
        "train_loss": train_loss, "source_val_loss": source_ev["loss"],
        "ms_per_step": 1000 * wall / max(done, 1), "init_logit_distance": before,
        "collapsed": is_collapsed(ev["acc"], train_loss, shape.num_classes),
        "text_used": task.name,
        "pretrained_sha256": pretrained_params(config)[1].get("weights_sha256"),
        "torch_threads": torch.get_num_threads(),
    }
    if base is not None:
        drift = products_drift(base.products[done], products[done])
        metrics |= {"adapter_drift": drift, "mean_adapter_drift": sum(drift.values()) / len(drift),
                    "max_adapter_drift": max(drift.values()),
                    "step1_adapter_drift": (curves["adapter_drift"][curves["step"].index(1)]
                                            if 1 in curves["step"] else None),
                    "logit_drift": _rel(val_logits, base.val_logits),
                    "base_val_loss": base.result.metrics["val_loss"]}
    ok = finite and math.isfinite(ev["loss"])
    if ok and metrics["collapsed"]:
        metrics["note"] = "collapsed: validation accuracy or train loss at chance"
    result = RunResult("ok" if ok else "diverged", metrics, curves)
    return Trained(model, result, val_logits, products)


def audit_adapters(config: LoraConfig | Mapping[str, Any], method: str, init: str, lr: float, *,
                   steps: int = 10, windows: int = 4, seed: int = 5) -> LoraTwinAuditResult:
    """The library's twin audit (:func:`gaugekit.audit.lora.audit_lora_twins`) of ``method`` at
    rate ``lr`` on this experiment's adapters, in float64: the pretrained model (of ``config``,
    a scale's configuration or a run's config) with adapters ``(init, seed)``, ``steps``
    fine-tuning batches cut to their first ``windows`` windows, the first held-out windows as the
    probe of the function check."""
    if isinstance(config, LoraConfig):
        config = config._config(method)
    shape = TransformerShape(**config["model"])
    vocab = _vocab(config["pretrain"], config["finetune"])
    task = text_task(config["finetune"], vocab, shape.seq_len, steps)
    model, _ = lora_model(config, init, seed)
    batches = [(task.xs[t][:windows], task.ys[t][:windows]) for t in range(steps)]
    return audit_lora_twins(model.double(), lambda pairs: make_optimizer(method, pairs, lr),
                            lambda m, batch: _loss(m, *batch), batches,
                            probe=task.val[0][:windows])


# --------------------------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------------------------


def _batch_key(config: Mapping[str, Any]) -> str:
    drop = {"role", "lr", "grid", "selection_seeds", "init", "init_seed", "twin"}
    return canonical_json({k: v for k, v in config.items() if k not in drop})


def timing_order(specs: Sequence[RunSpec]) -> list[RunSpec]:
    """The timing runs round by round, the optimizers of each round in an order shuffled by the
    round's number (the same order on every machine)."""
    import random

    rounds: dict[int, list[RunSpec]] = {}
    for s in specs:
        rounds.setdefault(int(s.config["round"]), []).append(s)
    out: list[RunSpec] = []
    for k in sorted(rounds):
        batch = sorted(rounds[k], key=lambda s: METHODS.index(s.config["method"]))
        random.Random(k).shuffle(batch)
        out += batch
    return out


def run_lora_batch(specs: Sequence[RunSpec], device: torch.device) -> list[RunResult]:
    """The runs of one optimizer: its selection and, when fresh runs are asked for, the fresh
    seeds with their twins at the selected rate; or the pretraining run; or the timing runs of
    every optimizer, interleaved (:func:`timing_order`)."""
    c0 = specs[0].config
    if c0.get("role") == "timing":
        done = {}
        for s in timing_order(specs):
            c = s.config
            r = finetune(c, c["method"], float(c["lr"]), "zero", int(c["init_seed"]),
                         {"kind": "base"}, device=device).result
            r.metrics["round"] = int(c["round"])
            done[s.run_id] = r
        return [done[s.run_id] for s in specs]
    if any(_batch_key(s.config) != _batch_key(c0) for s in specs):
        raise ValueError("Invalid specs: expected runs of one optimizer (one batch key)")
    if c0["kind"] == "lora_pretrain":
        _, metrics = pretrained_params(c0, device)
        return [RunResult("ok", dict(metrics)) for _ in specs]
    method = c0["method"]
    fresh = [s for s in specs if s.config["role"] == "fresh"]
    grid = [float(x) for x in (fresh[0].config["grid"] if fresh else [])]
    sel_seeds = [int(x) for x in (fresh[0].config["selection_seeds"] if fresh else [])]
    rows = [(float(s.config["lr"]), int(s.config["init_seed"]))
            for s in specs if s.config["role"] == "select"]
    rows += [(lr, seed) for lr in grid for seed in sel_seeds if (lr, seed) not in rows]
    results: dict[Any, RunResult] = {}
    losses: dict[float, list[float]] = {}
    for lr, seed in rows:
        r = finetune(c0, method, lr, "zero", seed, {"kind": "base"}, device=device).result
        losses.setdefault(lr, []).append(r.metrics["val_loss"] if r.status == "ok"
                                         else float("inf"))
        results[(lr, seed)] = r
    if fresh:
        choice = select_rate(grid, losses)
        lr = float(choice["lr"])
        bases: dict[tuple[str, int], Trained] = {}
        for spec in sorted(fresh, key=lambda s: s.config["twin"]["kind"] != "base"):
            init, twin = spec.config["init"], spec.config["twin"]
            seed = int(spec.config["init_seed"])
            if (init, seed) not in bases:
                bases[(init, seed)] = finetune(c0, method, lr, init, seed, {"kind": "base"},
                                               device=device)
            trained = (bases[(init, seed)] if twin["kind"] == "base"
                       else finetune(c0, method, lr, init, seed, twin, bases[(init, seed)],
                                     device=device))
            trained.result.metrics["selection"] = choice
            results[spec.run_id] = trained.result
    return [results[s.run_id] if s.config["role"] == "fresh"
            else results[(float(s.config["lr"]), int(s.config["init_seed"]))] for s in specs]


class LoraExperiment:
    """The fine-tuning comparison as a sweep experiment (see :mod:`gaugebook.engine.sweep`)."""

    name = NAME
    description = "LoRA fine-tuning: tuned optimizers on the adapters, gauge and noise twins"

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).part_names

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)

    def batch_key(self, spec: RunSpec) -> Hashable:
        if spec.config.get("role") == "timing":  # every optimizer in one batch, interleaved
            return "timing"
        return _batch_key(spec.config)

    def run_batch(self, specs: Sequence[RunSpec], *, device: torch.device,
                  progress: bool) -> list[RunResult]:
        return run_lora_batch(specs, device)

    def batch_cost(self, specs: Sequence[RunSpec]) -> float:
        c = specs[0].config
        if c["kind"] == "lora_pretrain":
            return float(c["pretrain"]["num_steps"])
        if c.get("role") == "timing":
            return float(c["num_steps"]) * len(specs)
        grid = len(c.get("grid", [])) or 6
        return float(c["num_steps"]) * (len(specs) + grid * 2)


EXPERIMENT = LoraExperiment()


collect = collection.collector(EXPERIMENT, get_config, allow_missing=True)
