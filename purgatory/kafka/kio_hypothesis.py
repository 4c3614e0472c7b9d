"""kio without hypothesis at run time, and its strategies, built when a test first asks.

kio 0.6.5's phantom types (``kio.static._phantom``, the base of its bounded integers and
named strings) try ``import hypothesis.strategies`` when that module is imported, and if
it works, each phantom type registers a hypothesis strategy for itself as it is defined.
There is no setting to turn it off, so wherever hypothesis is installed (most test
environments) the first use of kio costs hypothesis's import, 0.2 s warm, 1 s cold; and
where hypothesis is imported already (a pytest plugin imported it), the registration
alone costs 0.05-0.13 s: ``register_type_strategy`` checks that each strategy is not
empty, which builds it (the named strings' ``text()`` computes its character tables, the
datetimes' ``timezones()`` reads every zone).

:func:`quiet_kio` (the Kafka wire modules call it before they import kio) imports
``kio.static._phantom`` with hypothesis hidden, imported or not, unless kio's phantom
types are imported already (then it is too late: kio registered them itself, as usual).
Importing this module does nothing else: hypothesis imports it to run its entry point,
which must not import kio for the many test runs that never use it.
The strategies are not lost: :func:`register_strategies` registers, for each of kio's
phantom types, a function that hypothesis calls when a test first resolves that type
(``st.from_type``, ``st.builds``, ``@given`` on kio's classes): it runs kio's own
registration for that type then, and answers the strategy kio registered, so that tests
draw what they drew before. It runs when hypothesis is imported (the ``hypothesis`` entry
point in pyproject.toml, hypothesis's own way for a library to register strategies), or at
once by :func:`quiet_kio` if hypothesis is imported already.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any, Final

#: kio's module that imports hypothesis when it is imported
PHANTOM: Final = "kio.static._phantom"
#: kio's modules that define phantom types (all of them, imported before registering, so
#: that none is defined later and registers itself as it is defined, at full cost)
PHANTOM_TYPES: Final = ("kio.static.primitive", "kio.schema.types")
#: hypothesis's registry of type strategies, where kio's registration puts its strategy
_REGISTRY: Final = "hypothesis.strategies._internal.types"


def quiet_kio() -> None:
    """Import kio's phantom types with hypothesis hidden (and, if hypothesis is imported,
    register their strategies to be built when asked); the Kafka wire modules call it
    before they import kio. Does nothing if kio's phantom types are imported already."""
    if PHANTOM in sys.modules:
        return
    imported = sys.modules.get("hypothesis")
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import: ImportError
    try:
        importlib.import_module(PHANTOM)
    finally:
        if sys.modules.get("hypothesis", ...) is None:
            if imported is None:
                del sys.modules["hypothesis"]
            else:
                sys.modules["hypothesis"] = imported
    # While it is hidden (the one import above, on the importing thread), another thread
    # importing hypothesis would fail: the wire is imported before a test's threads run.
    if imported is not None and getattr(imported, "strategies", None) is not None:
        # hypothesis has run its entry points (register_strategies found no kio then) or
        # is running them (then the second call finds kio's flag set and does nothing)
        register_strategies()


def _phantom_types(phantom: Any) -> list[type]:
    """kio's phantom types defined so far, each after its base, as kio defines them."""
    found: list[type] = []
    seen: set[type] = set()
    pending: list[type] = [phantom.Phantom]
    while pending:
        subclasses: list[type] = pending.pop(0).__subclasses__()
        for sub in subclasses:
            if sub not in seen:
                seen.add(sub)
                found.append(sub)
                pending.append(sub)
    return found


def _deferred(kind: type, registry: dict[Any, Any]) -> Callable[[type], Any]:
    """What hypothesis calls to resolve ``kind`` (or a base of it): kio's registration of
    ``kind``, run now, and the strategy it registered (``NotImplemented`` if none)."""

    def resolve(_asked: type) -> Any:
        kind.__hypothesis_hook__()  # type: ignore[attr-defined]  # kio's registration
        strategy = registry.get(kind)
        return NotImplemented if strategy is resolve or strategy is None else strategy

    return resolve


def register_strategies() -> None:
    """Register, for each of kio's phantom types, its strategy as a function hypothesis
    calls when a test first resolves the type (built then, by kio's own registration), and
    let phantom types defined later register their own as kio's do (run by hypothesis as
    it is imported, or by :func:`quiet_kio` if hypothesis is imported already; does
    nothing if kio is not imported, was imported with hypothesis visible, or is the one
    importing hypothesis: then its types are not defined yet and will register
    themselves)."""
    phantom = sys.modules.get(PHANTOM)
    if phantom is None or not hasattr(phantom, "Phantom") or phantom.hypothesis is not None:
        return
    import hypothesis
    from hypothesis.strategies import register_type_strategy

    for name in PHANTOM_TYPES:
        importlib.import_module(name)
    registry = getattr(importlib.import_module(_REGISTRY), "_global_type_lookup", None)
    no_hook = phantom.Phantom.__hypothesis_hook__.__func__
    for kind in _phantom_types(phantom):
        hook = kind.__hypothesis_hook__  # type: ignore[attr-defined]
        if hook.__func__ is no_hook:
            continue  # kio registers nothing for it (its record sets)
        if isinstance(registry, dict):
            register_type_strategy(kind, _deferred(kind, registry))
        else:  # a hypothesis without that registry: register as kio does
            hook()
    vars(phantom)["hypothesis"] = hypothesis  # the types defined from now on register
