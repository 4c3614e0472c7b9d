"""What importing and starting the embedded cluster loads: no schema module it does not
use, and not hypothesis, installed or not (kio's phantom types would import it; see
purgatory/kafka/kio_hypothesis.py), while a test that imports hypothesis itself still
gets kio's strategies."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest
from kio.schema.index import api_key_map

from purgatory.kafka.protocol import ApiKey
from purgatory.kafka.schemas import CHECK_NAMES_ENV, UNSTABLE, versions


def _python(code: str) -> str:
    # as a user's process runs: without the tests' check of kio names, which loads every
    # version of an API whose answer leaves a name out
    env = {k: v for k, v in os.environ.items() if k != CHECK_NAMES_ENV}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_importing_the_embedded_cluster_imports_no_hypothesis() -> None:
    _python("""
        import purgatory.kafka.embedded, sys
        assert "hypothesis" not in sys.modules
        """)


def test_importing_the_embedded_cluster_imports_only_what_starting_it_needs() -> None:
    """Of kio's schemas, the request and response headers only; not the ``crc32c``
    package (imported at the first record batch's checksum: its import reads installed
    metadata)."""
    loaded = _python("""
        import sys
        import purgatory.kafka.embedded
        print(" ".join(sorted(sys.modules)))
        """).split()
    schemas = {m for m in loaded if m.startswith("kio.schema.") and ".v" in m}
    assert schemas == {
        f"kio.schema.{kind}_header.v{version}{part}"
        for kind, versions in (("request", (1, 2)), ("response", (0, 1)))
        for version in versions
        for part in ("", ".header")
    }
    assert not {m for m in loaded if m.split(".")[0] in {"crc32c", "hypothesis"}}


_METADATA_ANSWERED = """
    import socket, struct, sys
    from purgatory.kafka.embedded import EmbeddedKafka

    with EmbeddedKafka(brokers=3, topics={"t": 1}) as kafka:
        host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            # Metadata v1: header (key 3, version 1, correlation id 7, client id "c"),
            # then a null topic array (all topics)
            body = struct.pack(">hhih", 3, 1, 7, 1) + b"c" + struct.pack(">i", -1)
            conn.sendall(struct.pack(">i", len(body)) + body)
            answer = b""
            while len(answer) < 8:
                answer += conn.recv(4096)
            assert struct.unpack_from(">ii", answer)[1] == 7, answer
    assert "hypothesis" not in sys.modules
    loaded = sorted(m for m in sys.modules if m.startswith("kio.schema.") and ".v" in m)
    print(" ".join(loaded))
    """


def test_a_started_cluster_answering_metadata_imports_no_hypothesis_and_one_schema() -> None:
    loaded = _python(_METADATA_ANSWERED).split()
    # the headers, and the one (API, version) asked
    assert {m for m in loaded if "_header" not in m} == {
        "kio.schema.metadata.v1",
        "kio.schema.metadata.v1.request",
        "kio.schema.metadata.v1.response",
    }


def test_hypothesis_imported_later_still_has_kios_strategies() -> None:
    """The ``hypothesis`` entry point registers them when hypothesis is imported: for the
    phantom types defined before (i32) and after (the schemas' TopicName)."""
    out = _python("""
        import purgatory.kafka.embedded
        from hypothesis import strategies as st
        from kio.schema.types import TopicName
        from kio.static.primitive import i32, u8
        from purgatory.kafka.protocol import ApiKey
        from purgatory.kafka.schemas import request_type
        assert st.from_type(u8).example() in range(256)
        assert st.from_type(i32).example() in range(-(2**31), 2**31)
        assert isinstance(st.from_type(TopicName).example(), str)
        print(type(st.from_type(request_type(ApiKey.METADATA, 12)).example()).__name__)
        """)
    assert out.split() == ["MetadataRequest"]


def test_hypothesis_imported_first_builds_no_kio_strategy_until_a_test_asks() -> None:
    """With hypothesis imported before the cluster (a pytest plugin imported it), kio's
    phantom types do not build their strategies as they are defined (0.05-0.13 s): each
    is registered as a function hypothesis calls when a test first resolves its type,
    which answers kio's own strategy."""
    out = _python("""
        import hypothesis
        from hypothesis import strategies as st
        from hypothesis.strategies._internal.types import _global_type_lookup as registry
        import purgatory.kafka.embedded
        from kio.schema.types import TopicName
        from kio.static.primitive import Records, TZAware, i32, i32Timedelta, u8
        from purgatory.kafka.protocol import ApiKey
        from purgatory.kafka.schemas import request_type
        kinds = [u8, i32, TopicName, TZAware, i32Timedelta]
        assert not any(isinstance(registry[k], st.SearchStrategy) for k in kinds), registry
        assert Records not in registry  # kio registers nothing for its record sets
        assert st.from_type(u8).example() in range(256)
        assert st.from_type(i32).example() in range(-(2**31), 2**31)
        assert isinstance(st.from_type(TopicName).example(), str)
        assert st.from_type(TZAware).example().tzinfo is not None
        assert isinstance(registry[u8], st.SearchStrategy)  # kio's, registered as asked
        print(type(st.from_type(request_type(ApiKey.METADATA, 12)).example()).__name__)
        """)
    assert out.split() == ["MetadataRequest"]


def test_importing_hypothesis_imports_no_kio() -> None:
    """hypothesis imports the module of its entry point (kio_hypothesis) as it is
    imported, in every test run: that must not import kio for runs that never use it."""
    _python("""
        import sys
        import hypothesis
        assert "purgatory.kafka.kio_hypothesis" in sys.modules  # the entry point ran
        assert not [m for m in sys.modules if m.startswith("kio")], sorted(sys.modules)
        """)


def test_kio_imported_first_registers_its_strategies_as_usual() -> None:
    _python("""
        import sys
        import kio.schema.types
        assert "hypothesis" in sys.modules
        import purgatory.kafka.embedded
        from hypothesis import strategies as st
        from kio.static.primitive import i16
        assert st.from_type(i16).example() in range(-(2**15), 2**15)
        """)


def test_the_hypothesis_entry_point_is_installed() -> None:
    hooks = importlib.metadata.entry_points(group="hypothesis")
    assert "purgatory.kafka.kio_hypothesis:register_strategies" in {e.value for e in hooks}


def _kio_versions(name: str) -> list[int]:
    """The versions of an API that kio has a request and a response module for, found by
    importing them."""
    package = importlib.import_module(f"kio.schema.{name}")
    found = []
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("v") and module.name[1:].isdigit():
            for kind in ("request", "response"):
                importlib.import_module(f"kio.schema.{name}.{module.name}.{kind}")
            found.append(int(module.name[1:]))
    return sorted(found)


@pytest.mark.parametrize("key", list(ApiKey), ids=lambda key: key.name)
def test_versions_are_the_range_kio_has_modules_for(key: ApiKey) -> None:
    found = _kio_versions(api_key_map[key])
    high = found[-1] - (UNSTABLE.get(key) == found[-1])
    assert found == list(range(found[0], found[-1] + 1))
    assert versions(key) == (found[0], high)
