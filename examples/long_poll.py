"""A custom DelayedOperation in an asyncio app: long-polling for a new document version.

python examples/long_poll.py
"""

from __future__ import annotations

import asyncio

from purgatory import DelayedOperation, DelayedOperationPurgatory


class WaitForVersion(DelayedOperation):
    """Answer once ``doc`` reaches ``version``, or with the current version on timeout."""

    def __init__(self, store: dict[str, int], doc: str, version: int, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.store, self.doc, self.version = store, doc, version
        self.answer = 0

    def try_complete(self) -> bool:
        if self.store.get(self.doc, 0) >= self.version:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.answer = self.store.get(self.doc, 0)


async def main() -> None:
    store: dict[str, int] = {"readme": 1}
    async with DelayedOperationPurgatory[WaitForVersion]("LongPoll") as purgatory:

        async def poll(version: int, timeout_ms: int) -> str:
            op = WaitForVersion(store, "readme", version, timeout_ms)
            await purgatory.try_complete_else_watch(op, ["readme"])
            await op
            how = "timed out" if op.is_expired else "woke up"
            return f"waiting for v{version}: {how} at v{op.answer}"

        async def writer() -> None:
            for _ in range(2):
                await asyncio.sleep(0.1)
                store["readme"] += 1
                await purgatory.check_and_complete("readme")  # wake the watchers

        results = await asyncio.gather(poll(2, 1000), poll(3, 1000), poll(9, 300), writer())
        for line in results[:3]:
            print(line)
        print(purgatory.statistics())


if __name__ == "__main__":
    asyncio.run(main())
