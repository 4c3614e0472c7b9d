"""The class docstrings restored on the compiled core (mypyc drops them) are read from the
sources without parsing them (:func:`purgatory._compiled.class_docstrings`): the same
docstrings as :mod:`ast` reads."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import purgatory
from purgatory._compiled import CORE_MODULES, class_docstrings


def _by_ast(source: str) -> dict[str, str]:
    return {
        node.name: doc
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef) and (doc := ast.get_docstring(node)) is not None
    }


@pytest.mark.parametrize("name", CORE_MODULES)
def test_the_core_modules_docstrings_read_as_ast_reads_them(name: str) -> None:
    source = (Path(purgatory.__file__).parent / f"{name}.py").read_text(encoding="utf-8")
    found = class_docstrings(source)
    assert found == _by_ast(source)
    assert found  # each core module has documented classes


def test_headers_raw_strings_and_classes_without_a_docstring() -> None:
    source = textwrap.dedent('''
        from typing import Generic, TypeVar

        T = TypeVar("T")


        @final
        class Long(  # a comment: with a colon
            Generic[T],
            metaclass=type,
        ):

            r"""A raw \\d docstring,
            on two lines."""

            x: int = 0


        class Bare:
            def method(self) -> None:
                """Not the class's."""


        class Attribute:
            x = 1
            """Not a docstring either."""


        class One: """On the header's line is not supported: ast reads it."""
    ''')
    expected = _by_ast(source)
    assert class_docstrings(source) == {k: v for k, v in expected.items() if k != "One"}
    assert expected["Long"] == "A raw \\d docstring,\non two lines."
