"""The one config base: an experiment at one scale, its parts, and the paper/quick pair.

Every experiment describes itself twice, at the paper's sizes, seeds and budgets (``paper``)
and small enough to recompute on a laptop (``quick``), as a frozen dataclass that derives from
:class:`ScaleConfig`. The base holds what every such configuration has: its ``scale``, whether
that scale keeps its records under ``results/`` (``persist_records``; paper does, quick
recomputes them in a temporary folder), the names of its parts and the runs of each. A config
whose ``parts`` are objects with a ``name`` and ``specs()`` needs nothing more; one laid out
otherwise says its ``part_names`` and ``specs(part)`` itself.

:class:`Scales` is the pair: ``get_config = Scales(paper=_paper_config, quick=_quick_config)``
builds the configuration at a scale on each call (default: :func:`~gaugebook.engine.settings.
get_scale`), so a test may swap a builder (``get_config.builders["quick"] = tiny``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from gaugebook.engine.settings import get_scale
from gaugebook.engine.spec import RunSpec

__all__ = ["ScaleConfig", "Scales"]

C = TypeVar("C")


class ScaleConfig:
    """An experiment's configuration at one scale (subclassed by a frozen dataclass that has
    the fields ``scale: str`` and ``persist_records: bool``)."""

    scale: str
    persist_records: bool
    parts: Sequence[Any]

    @property
    def part_names(self) -> tuple[str, ...]:
        """The part names, in running order."""
        return tuple(p.name for p in self.parts)

    def part(self, name: str) -> Any:
        """The part called ``name``."""
        for part in self.parts:
            if part.name == name:
                return part
        raise ValueError(f"Invalid part: {name!r}; expected one of {list(self.part_names)}")

    def specs(self, part: str) -> list[RunSpec]:
        """The runs of part ``part``."""
        return self.part(part).specs()


class Scales(Generic[C]):
    """An experiment's configurations by scale: ``paper`` and ``quick`` build one each."""

    def __init__(self, *, paper: Callable[[], C], quick: Callable[[], C]) -> None:
        self.builders: dict[str, Callable[[], C]] = {"paper": paper, "quick": quick}

    def __call__(self, scale: str | None = None) -> C:
        """The configuration at ``scale`` (default: ``$GAUGEKIT_SCALE``, else quick)."""
        return self.builders[get_scale(scale)]()
