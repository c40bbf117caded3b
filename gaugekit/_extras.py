"""The optional dependencies, and the one check every part that needs one makes.

The core of the distribution (``pip install gaugekit``: :mod:`gaugekit.optim`,
:mod:`gaugekit.audit` (factors and heads), :mod:`gaugekit.gauge`, :mod:`gaugekit.linalg`, the
problems) needs torch and numpy only. Everything else comes with an *extra* of
``pyproject.toml``; a part that needs one calls :func:`require_extra` before importing it, so
that a missing package is an :class:`ImportError` naming the extra to install, not a bare
``No module named ...`` from deep inside a run.
"""

# Developer note (layers, gaugekit/__init__.py): floor 1, the ground.

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtra", "require_extra"]

#: extra of ``pyproject.toml`` → the modules it provides (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "experiments": ("matplotlib", "scipy", "tqdm", "pooch", "torchdiffeq", "cvxpy"),
    "cluster": ("distributed",),
    "ecosystem": ("pytorch_optimizer", "heavyball"),
}


class MissingExtra(ImportError):
    """A part of gaugekit needs an optional dependency that is not installed.

    ``part`` names what needs it, ``extra`` the extra that brings it, ``missing`` the modules
    that could not be found.
    """

    def __init__(self, part: str, extra: str, missing: tuple[str, ...], note: str = "") -> None:
        message = (
            f"{part} needs the {extra!r} extra (missing: {', '.join(missing)}): "
            f"pip install 'gaugekit[{extra}]' (from a checkout: pip install '.[{extra}]')"
        )
        super().__init__(message + (f"; {note}" if note else ""), name=missing[0])
        self.part, self.extra, self.missing = part, extra, missing


def _installed(module: str) -> bool:
    """Whether the top-level package of ``module`` can be imported here (imports nothing)."""
    return importlib.util.find_spec(module.partition(".")[0]) is not None


def require_extra(part: str, extra: str, *modules: str, note: str = "") -> None:
    """Raise :class:`MissingExtra` unless ``modules`` (default: every module of ``extra``) are
    installed. ``part`` says what needs them (``"gaugekit.experiments"``, a function); ``note``
    is appended to the message (e.g. what works without the extra)."""
    if extra not in EXTRAS:
        raise ValueError(f"Invalid extra: {extra!r}; expected one of {sorted(EXTRAS)}")
    missing = tuple(m for m in (modules or EXTRAS[extra]) if not _installed(m))
    if missing:
        raise MissingExtra(part, extra, missing, note)
