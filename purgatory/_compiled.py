"""Whether the core was compiled with mypyc, and the docstrings mypyc leaves out.

mypyc drops class docstrings; ``help(DelayedOperation)`` should still explain itself, so
the docstrings are read back from the ``.py`` sources installed beside the extensions.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

CORE_MODULES = ("_wheel", "_timer", "_operation", "_purgatory")
_MYPYC_FILLER = "mypyc filler docstring"


def is_compiled(module: ModuleType) -> bool:
    return not (module.__file__ or "").endswith(".py")


def class_docstrings(source: str) -> dict[str, str]:
    """The docstrings of the top-level classes of a module's ``source``, as
    :func:`ast.get_docstring` reads them, found without parsing the module (parsing the
    four core modules took 15-20 ms, at every import of the package): the first line of a
    class's body, if it opens triple quotes four spaces in, starts its docstring."""
    docs: dict[str, str] = {}
    lines = source.splitlines()
    for at, line in enumerate(lines):
        found = _CLASS.match(line)
        if found is None:
            continue
        body, depth = at, 0
        while True:  # to the header's last line, where its brackets close
            code = lines[body].partition("#")[0]
            depth += sum(map(code.count, "([{")) - sum(map(code.count, ")]}"))
            if depth <= 0 or body + 1 == len(lines):
                break
            body += 1
        if not code.rstrip().endswith(":"):
            continue  # a body on the header's line: not read (the tests say if it matters)
        body += 1
        while body < len(lines) and not lines[body].strip():
            body += 1
        opening = _DOCSTRING.match(lines[body]) if body < len(lines) else None
        if opening is None:
            continue
        text = "\n".join(lines[body:])
        close = text.find('"""', opening.end())
        docs[found[1]] = inspect.cleandoc(ast.literal_eval(text[4 : close + 3]))
    return docs


_CLASS = re.compile(r"class (\w+)\b")
_DOCSTRING = re.compile(r'    r?"""')


def restore_class_docstrings(module: ModuleType) -> None:
    source = Path(module.__file__ or "").parent / f"{module.__name__.rpartition('.')[2]}.py"
    if not source.is_file():
        return
    for name, doc in class_docstrings(source.read_text(encoding="utf-8")).items():
        if doc:
            cls = getattr(module, name, None)
            if cls is not None and cls.__doc__ in (None, "", _MYPYC_FILLER):
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
