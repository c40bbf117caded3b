r"""The optimizer ecosystem, audited — every optimizer class that ``pytorch-optimizer``
and ``heavyball`` export, run through :func:`gaugekit.audit.audit_equivariance`.

One run is one optimizer class of one library at a pinned version (the ``ecosystem`` extra of
``pyproject.toml``) under one gauge group of :data:`GROUPS`. The run builds the class on the
audit's factor pair with its default hyperparameters and runs the equivariance audit (the
float64 sensing loss, ``U₀`` 7×3, ``V₀`` 5×3, :data:`NUM_STEPS` steps with a closure) against
the group's twin: ``(U₀Q, V₀Q)`` with a Haar ``Q`` (``"orthogonal"``, ``O(r)``) or
``(U₀R, V₀R⁻ᵀ)`` with a random ``R`` of condition number :data:`CONDITION_NUMBER`
(``"general"``, ``GL(r)``), in float64; if the optimizer raises there it is audited again in
float32 with the float32 threshold. Every class runs under both groups, one record each (the
group is in the record's config, so a resumed sweep skips each pair it has). The pair is the
paper's ``[U, V]``, or LoRA's ``[A, B]`` (``W = B A``) for a class that wants LoRA pairs
(:data:`PAIR_LAYOUTS`); the layout is recorded too. The verdict:

``equivariant``     residual at most the dtype's threshold (:data:`gaugekit.audit.FLOAT64_THRESHOLD`
                    or ``FLOAT32_THRESHOLD``);
``approximately``   above the threshold but at most :data:`APPROXIMATE_BOUND` (a rule equivariant
                    in exact arithmetic that computes something in low precision, or one that
                    breaks the gauge only through a small term);
``not``             above :data:`APPROXIMATE_BOUND`;
``could not run``   with the reason: needs a model, needs second-order gradients, a wrapper,
                    refuses both dtypes, did not move, timed out, crashed, raised.

A run that did not move (every step left the factors where they were: LoRA-RITE at its
defaults skips every step of this problem) has nothing to compare and is ``could not run``
whatever its residual: the audit marks it ``static`` and :func:`classify` says so.

Arguments without a default are supplied and recorded: a wrapper's ``optimizer`` is
``torch.optim.SGD(params, lr=0.01)`` (equivariant, so the verdict is the wrapper's), a SAM-style
``base_optimizer`` is the class ``torch.optim.SGD`` with ``lr=0.01``, ``num_iterations``
(Ranger21) is the audit's step count, ``num_data`` (BSAM) the loss's number of measurements.
Constructors that need an ``nn.Module`` are not forced: ``could not run (needs a model)``.
heavyball runs eagerly (``heavyball.utils.compile_mode = None``): ``torch.compile`` changes the
kernels, not the rule, and would cost a compiler call per class on the CPU.

Isolation. Every audit runs in its own process (``forkserver`` with the library preloaded, so a
child starts in milliseconds) under a wall-clock limit; a child that hangs is killed and recorded
``could not run (timed out after … s)``, one that dies is ``could not run (crashed: …)``; the
sweep goes on either way (:func:`run_isolated`).

Parts: one per library. Paper scale: every exported class (:data:`CATALOG`, pinned; a test
compares it with the installed package), records committed under ``results/ecosystem/paper``.
Quick scale: the first :data:`QUICK_CLASSES` classes of each library, in a temporary folder.
"""

from __future__ import annotations

import importlib
import inspect
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gaugebook.engine import backends, collection
from gaugebook.engine.backends import Isolated
from gaugebook.engine.spec import RunResult, RunSpec
from gaugekit.audit import factors as audit_factors
from gaugekit.audit.factors import GROUPS

NAME = "ecosystem"
#: audit steps per run (past RAdam-style warm-ups of 5 steps and a first preconditioner refresh)
NUM_STEPS = 20
#: residuals above the dtype's threshold but at most this are "approximately" equivariant
APPROXIMATE_BOUND = 1e-2
#: the verdicts, in the table's order
VERDICTS: tuple[str, ...] = ("equivariant", "approximately", "not", "could not run")
#: wall-clock limit of one audit (the child process), seconds
TIMEOUT_S = {"paper": 30.0, "quick": 30.0}
#: classes per library at quick scale
QUICK_CLASSES = 3
#: the lr given to a base optimizer that a wrapper needs
WRAPPED_LR = 1e-2
#: ``cond(R)`` of the general-linear twin's ``R`` (the audit's default)
CONDITION_NUMBER = 4.0
#: Classes that take LoRA's pairs ``[A, B]`` (``A``: r × in, ``B``: out × r, ``W = B A``), in
#: alternating order, instead of the paper's ``[U, V]``: audited in layout ``"AB"``. Found by
#: reading the docstrings and signatures at the pinned versions (heavyball has none).
PAIR_LAYOUTS: dict[tuple[str, str], str] = {("pytorch_optimizer", "LoRARite"): "AB"}


def layout_of(library: str, cls_name: str) -> str:
    """The factor layout a class is audited in: ``"AB"`` for :data:`PAIR_LAYOUTS`, else
    ``"UV"``."""
    return PAIR_LAYOUTS.get((library, cls_name), "UV")


@dataclass(frozen=True)
class Library:
    """A library of the ecosystem: its distribution name, pinned version and import name."""

    name: str
    distribution: str
    version: str
    module: str


LIBRARIES: dict[str, Library] = {
    "pytorch_optimizer": Library("pytorch_optimizer", "pytorch-optimizer", "4.1.0",
                                 "pytorch_optimizer"),
    "heavyball": Library("heavyball", "heavyball", "3.2.1", "heavyball"),
}

#: Every optimizer class each library exports at the pinned version: ``pytorch_optimizer``'s
#: top-level ``torch.optim.Optimizer`` subclasses (it has no ``__all__``; six are torch's own
#: classes re-exported), ``heavyball``'s ``__all__`` minus its one function. Regenerate with
#: :func:`exported_optimizers` after changing a pin.
CATALOG: dict[str, tuple[str, ...]] = {
    "pytorch_optimizer": (
    'A2Grad', 'ADOPT', 'APOLLO', 'ASGD', 'AccSGD', 'AdEMAMix', 'AdaBelief', 'AdaBound',
    'AdaDelta', 'AdaFactor', 'AdaGC', 'AdaGO', 'AdaHessian', 'AdaLOMO', 'AdaMax', 'AdaMod',
    'AdaMuon', 'AdaNorm', 'AdaPNM', 'AdaShift', 'AdaSmooth', 'AdaTAM', 'Adai', 'Adalite',
    'Adam', 'AdamC', 'AdamG', 'AdamMini', 'AdamP', 'AdamS', 'AdamW', 'AdamWSN', 'Adan',
    'AggMo', 'Aida', 'AliG', 'Alice', 'Amos', 'Ano', 'ApolloDQN', 'AvaGrad', 'BCOS', 'BSAM',
    'CAME', 'Conda', 'DASH', 'DAdaptAdaGrad', 'DAdaptAdam', 'DAdaptAdan', 'DAdaptLion',
    'DAdaptSGD', 'DeMo', 'DiffGrad', 'DistributedMuon', 'DualAdam', 'EXAdam', 'EmoFact',
    'EmoLynx', 'EmoNavi', 'FAdam', 'FOCUS', 'FTRL', 'Fira', 'FlashAdamW', 'FriendlySAM',
    'Fromage', 'GSAM', 'GaLore', 'Grams', 'Gravity', 'GrokFastAdamW', 'Kate', 'Kron',
    'LARS', 'LBFGS', 'LOMO', 'LaProp', 'Lamb', 'Lion', 'LoRARite', 'LookSAM', 'Lookahead',
    'MADGRAD', 'MARS', 'MSVAG', 'Magma', 'Muon', 'MuonClip', 'NAdam', 'Nero', 'NorMuon',
    'NovoGrad', 'OrthoGrad', 'PAdam', 'PCGrad', 'PID', 'PNM', 'Prodigy', 'QHAdam', 'QHM',
    'RACS', 'RAdam', 'RMSprop', 'ROSE', 'Ranger', 'Ranger21', 'SAM', 'SCION', 'SCIONLight',
    'SGD', 'SGDP', 'SGDSaI', 'SGDW', 'SM3', 'SOAP', 'SPAM', 'SPlus', 'SRMM', 'SWATS',
    'SaRA', 'SafeFP16Optimizer', 'ScalableShampoo', 'ScheduleFreeAdamW',
    'ScheduleFreeRAdam', 'ScheduleFreeSGD', 'ScheduleFreeWrapper', 'Shampoo', 'SignSGD',
    'SimplifiedAdEMAMix', 'SophiaH', 'SpectralSphere', 'StableAdamW', 'StableSPAM', 'TAM',
    'TRAC', 'Tiger', 'VSGD', 'WSAM', 'Yogi',
    ),
    "heavyball": (
    'SGD', 'AdamW', 'NAdam', 'AdEMAMix', 'UnscaledAdamW', 'SUDSAdamW', 'Scion', 'AdamC',
    'RMSprop', 'HyperBallAdamW', 'MuonAdamW', 'SFAdamW', 'MSAMLaProp', 'ADOPT', 'Muon',
    'LaProp', 'MuonLaProp', 'SOAP', 'KLSOAP', 'KLShampoo', 'SOAPNAdam', 'SOAPAdEMAMix',
    'SignLaProp', 'SOLP', 'HeavySOAP', 'HeavyKLSOAP', 'HeavyKLShampoo', 'HeavySOAPNAdam',
    'HeavySOAPAdEMAMix', 'HeavySOLP', 'OrthoLaProp', 'LaPropOrtho', 'PSGDKron', 'LATHER',
    'PSGDPRO', 'QSGD', 'PSGDLRA', 'SplitOpt', 'SAMWrapper',
    ),
}


@dataclass(frozen=True)
class Investigation:
    """One follow-up audit of a surprising verdict: ``optimizer`` of ``library`` built with
    ``kwargs`` (and, when ``group`` is given, as one param group ``{"params": …, **group}``;
    ``call_train``: ``.train()`` first), over ``num_steps`` steps, against the twin of the gauge
    group ``gauge`` (:data:`GROUPS`). ``key`` names it in the book."""

    key: str
    library: str
    optimizer: str
    kwargs: Mapping[str, Any]
    group: Mapping[str, Any] | None = None
    call_train: bool = False
    num_steps: int = 20
    gauge: str = "orthogonal"

    def to_config(self) -> dict[str, Any]:
        return {"key": self.key, "kwargs": dict(self.kwargs),
                "group": dict(self.group) if self.group else None,
                "call_train": self.call_train}


_USE_MUON = {"use_muon": True}
#: The follow-ups of the surprising verdicts (part ``investigations``), each one question:
INVESTIGATIONS: tuple[Investigation, ...] = (
    # float32 state inside a float64 run: heavyball's storage_dtype default
    Investigation("hb_sgd_f64_state", "heavyball", "SGD", {"storage_dtype": "float64"}),
    Investigation("hb_muon_f64_state", "heavyball", "Muon", {"storage_dtype": "float64"}),
    Investigation("hb_muonadamw_f64_state", "heavyball", "MuonAdamW",
                  {"storage_dtype": "float64"}),
    # UnscaledAdamW: round-off or structure? (float64 state; the first steps)
    Investigation("hb_unscaled_f64_state", "heavyball", "UnscaledAdamW",
                  {"storage_dtype": "float64"}),
    Investigation("hb_unscaled_1_step", "heavyball", "UnscaledAdamW", {}, num_steps=1),
    Investigation("hb_unscaled_5_steps", "heavyball", "UnscaledAdamW", {}, num_steps=5),
    # SOAP is two-sided: precondition only the gauge side (k = 3 ≤ max dim < n = 7)
    Investigation("po_soap_gauge_side", "pytorch_optimizer", "SOAP",
                  {"max_precondition_dim": 3}),
    Investigation("hb_soap_gauge_side", "heavyball", "SOAP", {"max_precond_dim": 3}),
    Investigation("po_soap_2_steps", "pytorch_optimizer", "SOAP", {}, num_steps=2),
    # Muon-family classes want param groups flagged use_muon
    *(Investigation(f"po_{name.lower()}_use_muon", "pytorch_optimizer", name, {}, _USE_MUON)
      for name in ("Muon", "NorMuon", "AdaMuon", "MuonClip", "DistributedMuon", "AdaGO")),
    # schedule-free rules want .train() before training
    *(Investigation(f"po_{name.lower()}_train", "pytorch_optimizer", name, {}, call_train=True)
      for name in ("ScheduleFreeWrapper", "ScheduleFreeAdamW", "ScheduleFreeRAdam")),
    # Conda (Adam on a projected gradient): the default projection here is on the gauge side
    Investigation("po_conda_left", "pytorch_optimizer", "Conda", {"projection_type": "left"}),
    # horizons: a rule that adapts only after its first step(s), or after a warm-up
    Investigation("po_adai_1_step", "pytorch_optimizer", "Adai", {}, num_steps=1),
    Investigation("po_msvag_1_step", "pytorch_optimizer", "MSVAG", {}, num_steps=1),
    Investigation("po_radam_5_steps", "pytorch_optimizer", "RAdam", {}, num_steps=5),
    Investigation("po_scalable_shampoo_preconditioned", "pytorch_optimizer", "ScalableShampoo",
                  {"start_preconditioning_step": 2, "preconditioning_compute_steps": 5}),
    Investigation("po_apollo_belief", "pytorch_optimizer", "ApolloDQN", {"rebound": "belief"}),
    Investigation("po_apollo_60_steps", "pytorch_optimizer", "ApolloDQN", {}, num_steps=60),
    # LoRA-RITE skips every step at its defaults (update_skipping = 1): turn the skipping off
    *(Investigation(f"po_lorarite_no_skipping{tag}", "pytorch_optimizer", "LoRARite",
                    {"update_skipping": 0.0}, gauge=gauge)
      for tag, gauge in (("", "orthogonal"), ("_gl", "general"))),
)


def library_available(library: str) -> bool:
    """Whether the library imports here at its pinned version."""
    lib = LIBRARIES[library]
    try:
        from importlib.metadata import version

        return version(lib.distribution) == lib.version
    except Exception:  # noqa: BLE001 - not installed
        return False


def exported_optimizers(library: str) -> tuple[str, ...]:
    """The optimizer classes the installed ``library`` exports (see :data:`CATALOG`)."""
    module = importlib.import_module(LIBRARIES[library].module)
    names = getattr(module, "__all__", None)
    if names is None:
        names = sorted(dir(module))
    return tuple(
        n for n in names
        if inspect.isclass(getattr(module, n, None))
        and issubclass(getattr(module, n), torch.optim.Optimizer)
    )


#: What every child of the audit imports before it forks (with the library audited).
_PRELOAD = ("torch._dynamo", __name__, audit_factors.__name__)


def run_isolated(target: Callable[..., Any], args: tuple[Any, ...], timeout_s: float,
                 preload: Sequence[str] = ()) -> Isolated:
    """:func:`gaugebook.engine.backends.run_isolated` with the audit's modules preloaded too."""
    return backends.run_isolated(target, args, timeout_s, preload=(*_PRELOAD, *preload))


# --------------------------------------------------------------------------------------------
# one audit (runs in the child)
# --------------------------------------------------------------------------------------------

def _signature(cls: type) -> tuple[list[str], dict[str, Any]]:
    """The constructor's required arguments, and its scalar defaults worth recording (lr,
    betas, eps, weight decay, momentum)."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return [], {}
    required = [p.name for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    given = {p.name: p.default for p in params}
    defaults: dict[str, Any] = {}
    for key in ("lr", "betas", "eps", "weight_decay", "momentum"):
        value = given.get(key, inspect.Parameter.empty)
        if isinstance(value, (int, float, tuple, type(None))) and not isinstance(value, bool):
            defaults[key] = list(value) if isinstance(value, tuple) else value
    return required, defaults


def _factory(cls: type, required: Sequence[str], num_measurements: int,
             kwargs: Mapping[str, Any] | None = None, group: Mapping[str, Any] | None = None,
             call_train: bool = False,
             ) -> tuple[Callable[[list[torch.Tensor]], torch.optim.Optimizer], dict[str, str]]:
    """A factory for the audit and the arguments it supplies (name → description).

    ``kwargs`` are passed on top (an investigation's settings), ``group`` turns the parameters
    into one param group ``{"params": [U, V], **group}``, ``call_train`` calls ``.train()`` on
    the new optimizer (schedule-free rules)."""
    supplied: dict[str, str] = {}
    extra: dict[str, Any] = dict(kwargs or {})
    wrap_instance = "optimizer" in required
    for name in required:
        if name == "params":
            continue
        if name == "optimizer":
            supplied[name] = f"torch.optim.SGD(params, lr={WRAPPED_LR:g})"
        elif name == "base_optimizer":
            extra[name] = torch.optim.SGD
            extra["lr"] = WRAPPED_LR
            supplied[name] = f"torch.optim.SGD (class), lr={WRAPPED_LR:g}"
        elif name == "num_iterations":
            extra[name] = NUM_STEPS
            supplied[name] = f"{NUM_STEPS} (the audit's steps)"
        elif name == "num_data":
            extra[name] = num_measurements
            supplied[name] = f"{num_measurements} (the loss's measurements)"
        else:
            raise TypeError(f"required argument {name!r} has no sensible default")

    def factory(params: list[torch.Tensor]) -> torch.optim.Optimizer:
        given: Any = [{"params": params, **group}] if group else params
        opt = cls(torch.optim.SGD(given, lr=WRAPPED_LR) if wrap_instance else given, **extra)
        if call_train:
            opt.train()
        return opt

    return factory, supplied


def audit_class(module_name: str, class_name: str, num_steps: int = NUM_STEPS,
                kwargs: Mapping[str, Any] | None = None, group: Mapping[str, Any] | None = None,
                call_train: bool = False, gauge: str = "orthogonal", layout: str = "UV",
                condition_number: float = CONDITION_NUMBER) -> dict[str, Any]:
    """Audit ``module_name.class_name`` with its defaults (float64, else float32); a plain dict.

    ``kwargs``, ``group`` and ``call_train`` change the construction (see :func:`_factory`);
    the main parts use none of them, the investigations do. ``gauge`` (a group of
    :data:`GROUPS`), ``layout`` and ``condition_number`` go to
    :func:`~gaugekit.audit.factors.audit_equivariance` as its ``group``, ``layout`` and
    ``condition_number``.

    Keys: ``result`` (the :class:`~gaugekit.audit.AuditResult` fields, or ``None``),
    ``errors`` (dtype → message of the attempts that failed), ``supplied`` (the arguments given),
    ``defaults``, ``required``, ``origin`` (the class's module), ``reason`` (why it could not
    run, when it could not).
    """
    from dataclasses import asdict

    from gaugekit.audit.factors import AuditError, audit_equivariance

    module = importlib.import_module(module_name)
    if module_name == "heavyball":
        importlib.import_module("heavyball.utils").compile_mode = None
    cls = getattr(module, class_name)
    required, defaults = _signature(cls)
    out: dict[str, Any] = {
        "result": None, "errors": {}, "supplied": {}, "defaults": defaults,
        "required": required, "origin": getattr(cls, "__module__", "?"), "reason": None,
    }
    if "model" in required:
        out["reason"] = "needs a model (an nn.Module argument)"
        return out
    if "specs" in required:
        out["reason"] = "needs per-parameter specs (routes parameters to other optimizers)"
        return out
    num_measurements = 3 * 2 * (7 + 5)  # the audit's default sensing loss (r = 2, n = 7, m = 5)
    try:
        factory, out["supplied"] = _factory(cls, required, num_measurements, kwargs, group,
                                            call_train)
    except TypeError as exc:
        out["reason"] = f"needs an argument the audit cannot supply ({exc})"
        return out
    for dtype in (torch.float64, torch.float32):
        name = str(dtype).removeprefix("torch.")
        try:
            with torch.random.fork_rng():
                torch.manual_seed(0)
                result = audit_equivariance(factory, num_steps=num_steps, dtype=dtype,
                                            group=gauge, layout=layout,
                                            condition_number=condition_number)
        except Exception as exc:  # noqa: BLE001 - recorded (AuditError and the rest)
            text = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, AuditError) and exc.__cause__ is not None:
                text += " | " + "".join(traceback.format_exception_only(exc.__cause__)).strip()
            out["errors"][name] = text[:600]
            continue
        out["result"] = asdict(result)
        return out
    out["reason"] = _failure_reason(out["errors"].get("float64", ""), out["errors"].get(
        "float32", ""))
    return out


def _failure_reason(err64: str, err32: str) -> str:
    """One line: why neither dtype ran."""
    text = (err64 + " " + err32).lower()
    second_order = ("create_graph", "hessian", "does not require grad and does not have a grad_fn")
    if any(pattern in text for pattern in second_order):
        return "needs second-order gradients (backward with create_graph=True)"
    if "non-finite" in text:
        return "diverged (non-finite parameters) with its defaults"
    if "closure" in text:
        return "needs a closure protocol of its own"
    first = err64 or err32
    return "raised: " + first.split(" | ")[0][:160]


# --------------------------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------------------------


def classify(outcome: Mapping[str, Any], settings: str = "its defaults") -> tuple[str, str]:
    """``(verdict, note)`` of one run's metrics (the fields :func:`audit_class` returned plus
    ``isolation``): see the module docstring for the bands. A run that did not move is
    ``could not run``, its note naming the ``settings`` it ran with."""
    iso = outcome.get("isolation", "ok")
    if iso != "ok":
        return "could not run", str(outcome.get("reason") or iso)
    result = outcome.get("result")
    if result is None:
        return "could not run", str(outcome.get("reason") or "no result")
    if result["static"]:
        return "could not run", f"did not move in {result['num_steps']} steps with {settings}"
    residual, threshold = result["residual"], result["threshold"]
    note = "" if result["dtype"] == "float64" else (
        "refuses float64 (" + str(outcome.get("errors", {}).get("float64", ""))[:120] + ")")
    if residual <= threshold:
        return "equivariant", note
    if residual <= APPROXIMATE_BOUND:
        return "approximately", note
    return "not", note


def counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many rows have each verdict (keys in :data:`VERDICTS` order)."""
    out = dict.fromkeys(VERDICTS, 0)
    for row in rows:
        out[row["verdict"]] += 1
    return out


# --------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------


class EcosystemAudit:
    """The ecosystem audit as a sweep experiment (one run = one optimizer class under one gauge
    group; a batch = one library's runs under one group)."""

    name = NAME
    description = "every optimizer class of pytorch-optimizer and heavyball through the audit"

    def parts(self, scale: str) -> tuple[str, ...]:
        return (*LIBRARIES, "investigations")

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        if part == "investigations":
            chosen = INVESTIGATIONS if scale == "paper" else ()
            return [self._spec(part, inv.library, inv.optimizer, inv.num_steps, scale,
                               inv.gauge, inv.to_config()) for inv in chosen]
        if part not in LIBRARIES:
            raise ValueError(f"Invalid part: {part!r}; expected one of {self.parts(scale)}")
        names = CATALOG[part] if scale == "paper" else CATALOG[part][:QUICK_CLASSES]
        return [self._spec(part, part, name, NUM_STEPS, scale, gauge)
                for gauge in GROUPS for name in names]

    @staticmethod
    def _spec(part: str, library: str, cls_name: str, num_steps: int, scale: str,
              gauge: str, investigation: Mapping[str, Any] | None = None) -> RunSpec:
        """One run's spec: the class, the audit's settings, the gauge group (with ``cond(R)``
        for ``"general"``), the layout, and the investigation's changes if any."""
        lib = LIBRARIES[library]
        config = {
            "library": lib.name, "distribution": lib.distribution, "version": lib.version,
            "optimizer": cls_name, "num_steps": num_steps, "audit": "default sensing loss "
            "7x5, k = 3, seed 0", "timeout_s": TIMEOUT_S[scale], "dtype": "float64",
            "group": gauge, "layout": layout_of(library, cls_name),
        }
        if gauge == "general":
            config["condition_number"] = CONDITION_NUMBER
        if investigation is not None:
            config["investigation"] = dict(investigation)
        return RunSpec(NAME, part, config, {"audit": 0})

    def batch_key(self, spec: RunSpec) -> Hashable:
        return spec.config["library"], spec.config["group"]

    def run_batch(self, specs: Sequence[RunSpec], *, device: torch.device,
                  progress: bool) -> list[RunResult]:
        library = specs[0].config["library"]
        lib = LIBRARIES[library]
        if not library_available(library):
            raise RuntimeError(
                f"{lib.distribution}=={lib.version} is not installed: "
                f"pip install '{lib.distribution}=={lib.version}' (the ecosystem extra)"
            )
        results = []
        for spec in specs:
            c = spec.config
            inv = c.get("investigation") or {}
            args = (lib.module, c["optimizer"], int(c["num_steps"]), inv.get("kwargs"),
                    inv.get("group"), bool(inv.get("call_train", False)), c["group"],
                    c["layout"], float(c.get("condition_number", CONDITION_NUMBER)))
            iso = run_isolated(audit_class, args,
                               float(c["timeout_s"]), preload=(lib.module,))
            metrics: dict[str, Any] = {"isolation": iso.status, "seconds": iso.seconds}
            if iso.status == "ok":
                metrics.update(iso.value)
            else:
                metrics["reason"] = iso.message
            verdict, note = classify(metrics, "its defaults" if not inv else
                                     "the investigation's settings")
            metrics["verdict"], metrics["note"] = verdict, note
            if progress:
                print(f"{library}.{c['optimizer']} [{c['group']}, {c['layout']}]: {verdict} "
                      f"{note}", flush=True)
            results.append(RunResult("ok", metrics))
        return results


EXPERIMENT = EcosystemAudit()


#: The ecosystem records: at paper scale the committed ones (read; missing runs are named by
#: :meth:`~gaugebook.engine.collection.Collected.note`); quick scale computes its few classes
#: afresh (the libraries must be installed).
collect = collection.collector(EXPERIMENT, allow_missing=True)


def table_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per record: library, optimizer, gauge ``group``, ``layout``, verdict,
    residual, the noise twin's residual, ``moved`` (the plain run's relative displacement),
    ``cond`` (the measured ``cond(R)`` of a general twin, else ``None``), dtype, note, reason."""
    rows = []
    for r in records:
        m, c = r["metrics"], r["config"]
        res = m.get("result") or {}
        rows.append({
            "library": c["library"], "optimizer": c["optimizer"], "verdict": m["verdict"],
            "group": c.get("group", "orthogonal"), "layout": c.get("layout", "UV"),
            "key": (c.get("investigation") or {}).get("key"), "num_steps": c["num_steps"],
            "residual": res.get("residual"), "dtype": res.get("dtype"),
            "noise_residual": res.get("noise_residual"), "moved": res.get("displacement"),
            "cond": res.get("condition_number"),
            "note": m.get("note") or "", "reason": m.get("reason") or "",
            "supplied": m.get("supplied") or {},
        })
    return rows
