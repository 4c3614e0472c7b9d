"""A listener that closes while clients connect leaves no socket open.

asyncio accepts a connection in one step and makes its transport in a task's first step,
one loop iteration later; a listener closed in between (``Server.close()``) makes that
transport fail (``Server._attach`` asserts the server is open, CPython gh-109564) with
its socket open and no handler to close it: ``ResourceWarning: unclosed transport``,
raised whenever the garbage collector next runs, in whichever test that is. Each round
here connects several raw sockets and closes the listener a different number of loop
steps later, so the close lands in every part of that window. Run in a fresh interpreter
under ``PYTHONDEVMODE=1 -W error::ResourceWarning``, so that the warning is really raised
(and asyncio's debug mode logs a failed transport) rather than filtered or collected in
another test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROUNDS = 40
CONNECTS = 6

SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, socket, sys

    from purgatory.kafka.server import KafkaProtocolServer

    ROUNDS, CONNECTS, LOOP = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    async def one_round(steps: int) -> None:
        server = KafkaProtocolServer()
        port = await server.start("127.0.0.1", 0)
        clients = []
        for _ in range(CONNECTS):
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", port))  # loopback: in the backlog at once
            clients.append(client)
            await asyncio.sleep(0)
        for _ in range(steps):
            await asyncio.sleep(0)
        await server.close()
        for client in clients:
            client.close()

    async def main() -> None:
        for n in range(ROUNDS):
            await one_round(n % 8)
            gc.collect()
            print(f"round {n} done", file=sys.stderr, flush=True)

    if LOOP == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())
    gc.collect()
    """
)


# uvloop makes a transport in the step that accepts its connection, so has no accept in
# flight to lose; it is here for the listener's close, which must work on both.
@pytest.mark.parametrize(
    "loop",
    [
        "asyncio",
        pytest.param(
            "uvloop", marks=pytest.mark.skipif(sys.platform == "win32", reason="no uvloop")
        ),
    ],
)
def test_a_listener_closing_under_connects_leaves_no_socket_open(loop: str) -> None:
    env = {**os.environ, "PYTHONDEVMODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            *("-W", "error::ResourceWarning", "-c", SCRIPT),
            *(str(ROUNDS), str(CONNECTS), loop),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    rounds = done.stderr.split("done\n")
    leaky = [n for n, text in enumerate(rounds) if "unclosed" in text]
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("round ") == ROUNDS, done.stderr
    assert "ResourceWarning" not in done.stderr, f"rounds {leaky} leaked:\n{done.stderr}"
    assert "unclosed" not in done.stderr, f"rounds {leaky} leaked:\n{done.stderr}"
    assert "Error on transport creation" not in done.stderr, done.stderr
