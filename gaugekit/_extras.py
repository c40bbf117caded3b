"""The optional dependencies, and the one check every part that needs one makes.

The library (``pip install gaugekit``) needs torch and numpy only; FlowAdam's ODE solvers come
with the ``flow`` extra. The other extras of ``pyproject.toml`` are the book's (its package
``gaugebook`` lives in a checkout, and ``python3 dev.py setup`` installs them all). A part that
needs an extra calls :func:`require_extra` before importing it, so that a missing package is
an :class:`ImportError` naming the extra to install, not a bare ``No module named ...`` from
deep inside a run.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "LIBRARY_EXTRAS", "MissingExtra", "require_extra"]

#: extra of ``pyproject.toml`` → the modules it provides (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "flow": ("torchdiffeq",),
    "experiments": ("matplotlib", "scipy", "tqdm", "pooch", "torchdiffeq", "cvxpy"),
    "cluster": ("distributed",),
    "ecosystem": ("pytorch_optimizer", "heavyball"),
    # the twin audit's tests on Hugging Face models (gaugekit never imports it)
    "transformers": ("transformers",),
    # the LoRA twin audit's tests on peft models (gaugekit never imports it)
    "peft": ("peft",),
}
#: the extras of the library itself; the others serve the book, from a checkout
LIBRARY_EXTRAS: frozenset[str] = frozenset({"flow", "transformers", "peft"})


class MissingExtra(ImportError):
    """A part of gaugekit needs an optional dependency that is not installed.

    ``part`` names what needs it, ``extra`` the extra that brings it, ``missing`` the modules
    that could not be found.
    """

    def __init__(self, part: str, extra: str, missing: tuple[str, ...], note: str = "") -> None:
        install = (f"pip install 'gaugekit[{extra}]'" if extra in LIBRARY_EXTRAS else
                   f"in a checkout of the book, pip install -e '.[{extra}]' (python3 dev.py "
                   "setup installs every extra)")
        message = f"{part} needs the {extra!r} extra (missing: {', '.join(missing)}): {install}"
        super().__init__(message + (f"; {note}" if note else ""), name=missing[0])
        self.part, self.extra, self.missing = part, extra, missing


def _installed(module: str) -> bool:
    """Whether the top-level package of ``module`` can be imported here (imports nothing)."""
    return importlib.util.find_spec(module.partition(".")[0]) is not None


def require_extra(part: str, extra: str, *modules: str, note: str = "") -> None:
    """Raise :class:`MissingExtra` unless ``modules`` (default: every module of ``extra``) are
    installed. ``part`` says what needs them (``"gaugebook"``, a function); ``note``
    is appended to the message (e.g. what works without the extra)."""
    if extra not in EXTRAS:
        raise ValueError(f"Invalid extra: {extra!r}; expected one of {sorted(EXTRAS)}")
    missing = tuple(m for m in (modules or EXTRAS[extra]) if not _installed(m))
    if missing:
        raise MissingExtra(part, extra, missing, note)
