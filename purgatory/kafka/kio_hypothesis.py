"""kio without hypothesis at run time, and its strategies when a test imports hypothesis.

kio 0.6.5's phantom types (``kio.static._phantom``, the base of its bounded integers and
named strings) try ``import hypothesis.strategies`` when that module is imported, and if
it works, each phantom type registers a hypothesis strategy for itself as it is defined.
There is no setting to turn it off, so wherever hypothesis is installed (most test
environments) the first use of kio costs hypothesis's import, 0.2 s warm, 1 s cold.

Importing this module (the Kafka wire modules do it before they import kio) imports
``kio.static._phantom`` with hypothesis hidden, unless hypothesis is already imported
(then there is nothing to save) or kio's phantom types are (then it is too late). The
strategies are not lost: :func:`register_strategies`, run by hypothesis itself when it
is imported (the ``hypothesis`` entry point in pyproject.toml, hypothesis's own way for a
library to register strategies), registers those of the phantom types defined so far and
lets kio register those defined later, as kio would have.
"""

from __future__ import annotations

import importlib
import sys
from typing import Final

#: kio's module that imports hypothesis when it is imported
PHANTOM: Final = "kio.static._phantom"


def _import_phantom() -> None:
    if PHANTOM in sys.modules or "hypothesis" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import: ImportError
    try:
        importlib.import_module(PHANTOM)
    finally:
        if sys.modules.get("hypothesis", ...) is None:
            del sys.modules["hypothesis"]


def register_strategies() -> None:
    """Register the strategies kio's phantom types would have registered had hypothesis
    been visible when they were defined, and let those defined later register their own
    (run by hypothesis as it is imported; does nothing if kio is not imported, was
    imported with hypothesis visible, or is the one importing hypothesis: then its types
    are not defined yet and will register themselves)."""
    phantom = sys.modules.get(PHANTOM)
    if phantom is None or not hasattr(phantom, "Phantom") or phantom.hypothesis is not None:
        return
    import hypothesis  # imported by now: hypothesis runs this as it is imported

    vars(phantom)["hypothesis"] = hypothesis  # the types defined from now on register
    seen: set[type] = set()
    pending: list[type] = [phantom.Phantom]
    while pending:  # each type after its base, as kio defines and registers them
        subclasses: list[type] = pending.pop(0).__subclasses__()
        for sub in subclasses:
            if sub not in seen:
                seen.add(sub)
                sub.__hypothesis_hook__()  # type: ignore[attr-defined]
                pending.append(sub)


_import_phantom()
