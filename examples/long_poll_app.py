"""An HTTP long-poll endpoint on ``wait_until``: clients wait for a document's next version.

    pip install 'purgatory-aio[service]'
    python examples/long_poll_app.py --port 8000
    curl 'localhost:8000/docs/readme?after=0&timeout_ms=30000'       # waits ...
    curl -XPUT localhost:8000/docs/readme -d 'hello'                 # ... and this wakes it

``GET /docs/{name}?after=N&timeout_ms=T`` answers as soon as the document's version is
above ``N`` (200 with the version and text), or after ``T`` ms with 304 and the current
version. ``PUT /docs/{name}`` stores a new text and wakes that document's waiters. A client
that hangs up while waiting has its wait removed: with ``handler_cancellation=True``
aiohttp cancels the handler, and cancelling ``wait_until`` removes the wait.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

from aiohttp import web

from purgatory import DelayedOperation, DelayedOperationPurgatory

MAX_TIMEOUT_MS = 60_000

PURGATORY = web.AppKey("purgatory", DelayedOperationPurgatory[DelayedOperation])
DOCS = web.AppKey("docs", dict[str, tuple[int, str]])


async def get_doc(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    try:
        after = int(request.query.get("after", "0"))
        timeout_ms = int(request.query.get("timeout_ms", "30000"))
    except ValueError:
        raise web.HTTPBadRequest(text="after and timeout_ms must be integers") from None
    if not 0 <= timeout_ms <= MAX_TIMEOUT_MS:
        raise web.HTTPBadRequest(text=f"timeout_ms must be within 0..{MAX_TIMEOUT_MS}")
    docs = request.app[DOCS]

    def newer() -> bool:
        return docs.get(name, (0, ""))[0] > after

    changed = await request.app[PURGATORY].wait_until(newer, [name], timeout_ms)
    version, text = docs.get(name, (0, ""))
    return web.json_response(
        {"name": name, "version": version, "text": text}, status=200 if changed else 304
    )


async def put_doc(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    docs = request.app[DOCS]
    version = docs.get(name, (0, ""))[0] + 1
    docs[name] = (version, await request.text())
    woken = await request.app[PURGATORY].check_and_complete(name)
    return web.json_response({"name": name, "version": version, "woken": woken})


def make_app() -> web.Application:
    app = web.Application()
    app[DOCS] = {}

    async def purgatory_lifecycle(app: web.Application) -> AsyncIterator[None]:
        async with DelayedOperationPurgatory[DelayedOperation]("LongPoll") as purgatory:
            app[PURGATORY] = purgatory
            yield

    app.cleanup_ctx.append(purgatory_lifecycle)
    app.router.add_get("/docs/{name}", get_doc)
    app.router.add_put("/docs/{name}", put_doc)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    args = parser.parse_args()
    web.run_app(make_app(), host=args.host, port=args.port, handler_cancellation=True)


if __name__ == "__main__":
    main()
