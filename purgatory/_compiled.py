"""Whether the core was compiled with mypyc, and the docstrings mypyc leaves out.

mypyc drops class docstrings; ``help(DelayedOperation)`` should still explain itself, so
the docstrings are read back from the ``.py`` sources installed beside the extensions.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

CORE_MODULES = ("_wheel", "_timer", "_operation", "_purgatory")
_MYPYC_FILLER = "mypyc filler docstring"


def is_compiled(module: ModuleType) -> bool:
    return not (module.__file__ or "").endswith(".py")


def restore_class_docstrings(module: ModuleType) -> None:
    source = Path(module.__file__ or "").parent / f"{module.__name__.rpartition('.')[2]}.py"
    if not source.is_file():
        return
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(module, node.name, None)
            doc = ast.get_docstring(node)
            if cls is not None and doc and cls.__doc__ in (None, "", _MYPYC_FILLER):
                try:
                    cls.__doc__ = doc
                except (AttributeError, TypeError):  # pragma: no cover - depends on mypyc
                    pass


def check_core() -> bool:
    """True if the core is compiled (restoring its class docstrings)."""
    compiled = False
    for name in CORE_MODULES:
        module = importlib.import_module(f"purgatory.{name}")
        if is_compiled(module):
            compiled = True
            restore_class_docstrings(module)
    return compiled
