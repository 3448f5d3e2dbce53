"""Each tenant's view of a catalog: the config's ``exposure`` lists applied.

Why here: a turn is built from the catalog its session sees (``Session._current``), so
a tool, resource or prompt hidden from a tenant is absent from everything a turn reads
(its listings, its search and the 20-tool threshold, its lookups: a call of it is
``unknown_tool`` as of a tool that does not exist), whichever way in made the turn.
The filtering is pure (``actors/router/exposure.py``); this picks the rules that apply
to a tenant and keeps each (catalog, tenant) view, computed once: catalogs are
immutable, so its identity is the key. With no rule for a tenant its catalog is the
view, at no cost.

A reload that changes the lists (``Exposures.replaced``) applies them from the next
epoch on (the reload moves it): a catalog of an earlier epoch keeps the lists it was
shown with, so two turns with the same epoch show one tenant the same items.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from actors.router.catalog import Catalog
from actors.router.exposure import Sieve, sieved
from supervisor.settings.model import ExposureRule

KEPT_VIEWS = 256
"""How many (catalog, tenant) views are kept: a few epochs of every tenant's sessions."""


class Exposures:
    """The ``exposure`` lists of one config, and the views made with them."""

    def __init__(
        self, rules: tuple[ExposureRule, ...] = (), *, earlier: Exposures | None = None, from_epoch: int = 0
    ) -> None:
        self.rules = rules
        self._earlier = earlier
        self._from_epoch = from_epoch
        self._sieves: dict[str, Sieve | None] = {}
        self._views: dict[tuple[int, str], tuple[Catalog, Catalog]] = {}

    def replaced(self, rules: tuple[ExposureRule, ...], from_epoch: int) -> Exposures:
        """The lists of a reloaded config, for catalogs of ``from_epoch`` and later
        (earlier ones keep these)."""
        earlier = Exposures(self.rules) if self.rules else None
        return Exposures(rules, earlier=earlier, from_epoch=from_epoch)

    def view(self, catalog: Catalog, tenant: str) -> Catalog:
        """``catalog`` as ``tenant`` may see it (``catalog`` itself when no list applies)."""
        if catalog.epoch < self._from_epoch:
            return self._earlier.view(catalog, tenant) if self._earlier is not None else catalog
        if not self.rules:
            return catalog
        sieve = self._sieve(tenant)
        if sieve is None:
            return catalog
        key = (id(catalog), tenant)
        kept = self._views.get(key)
        if kept is not None:  # the catalog is held with its view, so its id is not reused
            return kept[1]
        view = sieved(catalog, sieve)
        if len(self._views) >= KEPT_VIEWS:
            del self._views[next(iter(self._views))]
        self._views[key] = (catalog, view)
        return view

    def _sieve(self, tenant: str) -> Sieve | None:
        if tenant not in self._sieves:
            rules = tuple(r.rule for r in self.rules if fnmatchcase(tenant, r.tenant))
            self._sieves[tenant] = Sieve(rules) if rules else None
        return self._sieves[tenant]
