"""The synchronous timing wheel, against a plain dict model and Kafka's TimerTest cases."""

from __future__ import annotations

import math
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory import TimerCore, TimerTask
from purgatory._wheel import validate_delay


class Task(TimerTask):
    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        super().__init__(0)
        self.ident = ident

    def run(self) -> None:  # the core never runs tasks; the shell does
        raise AssertionError("TimerCore must not run tasks")


def expirations(tasks: list[TimerTask]) -> list[int]:
    return [task.expiration_ms for task in tasks]


# -- a model check ----------------------------------------------------------------------

steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-50, 200_000)),
        st.tuples(st.just("cancel"), st.integers(0, 10_000)),
        st.tuples(st.just("readd"), st.integers(0, 10_000)),
        st.tuples(st.just("advance"), st.integers(0, 40_000)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(
    tick_ms=st.integers(1, 7),
    wheel_size=st.integers(2, 25),
    start_ms=st.integers(0, 10**9),
    ops=steps,
)
def test_wheel_matches_model(tick_ms: int, wheel_size: int, start_ms: int, ops: list) -> None:
    """Never early, never lost, deadline order, cancel works, size right."""
    core = TimerCore(tick_ms, wheel_size, start_ms)
    now = start_ms
    tasks: list[Task] = []
    model: dict[int, int] = {}  # ident -> expiration of tasks still scheduled

    def check_advance(to: int) -> None:
        due = core.advance_to(to)
        expected = sorted(ident for ident, expiration in model.items() if expiration <= to)
        assert sorted(task.ident for task in due) == expected  # nothing early, nothing lost
        assert expirations(due) == sorted(expirations(due))  # deadline order
        for task in due:
            assert not task.is_scheduled
            del model[task.ident]

    for op, arg in ops:
        if op == "add":
            task = Task(len(tasks))
            tasks.append(task)
            core.schedule(task, now + arg)
            model[task.ident] = now + arg
        elif op in ("cancel", "readd") and tasks:
            task = tasks[arg % len(tasks)]
            task.cancel()
            model.pop(task.ident, None)
            if op == "readd":  # moving a task: cancel, then schedule again
                core.schedule(task, now + arg)
                model[task.ident] = now + arg
        elif op == "advance":
            now += arg
            check_advance(now)
        assert core.size == len(model)
        deadline = core.next_deadline()
        if model:
            assert deadline is not None
            assert deadline <= min(model.values())  # a wake-up is due by the first deadline
        else:
            assert deadline is None
    check_advance(now + 10**7)
    assert core.size == 0
    assert not model


# -- Kafka's TimerTest, in our words ------------------------------------------------------


def test_already_expired_tasks_are_due_at_once() -> None:
    core = TimerCore(1, 3, start_ms=0)
    tasks = [Task(i) for i in range(5)]
    for task in tasks:
        core.schedule(task, -task.ident)  # deadlines in the past
    assert core.next_deadline() == -4
    assert sorted(t.ident for t in core.advance_to(0)) == [0, 1, 2, 3, 4]


def test_tasks_expire_in_deadline_order_across_levels() -> None:
    core = TimerCore(1, 3, start_ms=0)
    deadlines = [0, 1, 2, 3, 5, 8, 9, 10, 11, 27, 81, 243, 1000, 5000]
    for i, deadline in enumerate(reversed(deadlines)):
        core.schedule(Task(i), deadline)
    fired: list[int] = []
    for now in range(0, 5001):
        batch = core.advance_to(now)
        assert all(task.expiration_ms <= now for task in batch)
        assert all(task.expiration_ms == now for task in batch), "a task ran late"
        fired.extend(expirations(batch))
    assert fired == deadlines
    assert core.levels > 3  # overflow wheels were created on demand


def test_wake_up_skips_buckets_emptied_by_cancel() -> None:
    core = TimerCore(1, 20, start_ms=0)
    early, late = Task(0), Task(1)
    core.schedule(early, 5)
    core.schedule(late, 50)
    early.cancel()
    assert core.size == 1
    assert core.next_deadline() == 40  # the level-1 bucket of `late`, not 5
    assert core.advance_to(49) == []
    assert core.next_deadline() == 50
    assert core.advance_to(50) == [late]


def test_coarse_tick_never_hands_out_early() -> None:
    core = TimerCore(10, 4, start_ms=0)
    tasks = [Task(i) for i in range(10)]
    for task in tasks:
        core.schedule(task, 30 + task.ident)  # all in the bucket [30, 40)
    assert core.next_deadline() == 30
    for now in range(30, 40):
        assert expirations(core.advance_to(now)) == [now]
        assert core.size == 39 - now
    assert core.next_deadline() is None


def test_cancel_is_idempotent_and_size_tracks() -> None:
    core = TimerCore()
    task = Task(0)
    core.schedule(task, 100)
    assert task.is_scheduled
    assert core.size == 1
    task.cancel()
    task.cancel()
    assert not task.is_scheduled
    assert core.size == 0
    assert core.advance_to(1000) == []


class WeakTask(TimerTask):  # no __slots__: it has a __weakref__, to watch its lifetime
    def run(self) -> None:
        raise AssertionError("TimerCore must not run tasks")


@pytest.mark.parametrize("leave", ["cancel", "expire", "clear"])
def test_a_task_out_of_the_timer_keeps_no_other_task_alive(leave: str) -> None:
    """A task that left its bucket (cancelled, handed out, cleared) holds no link to its
    former neighbours: keeping it must not keep them, and they need no collector."""
    core = TimerCore(1, 20, start_ms=0)
    dropped, kept = WeakTask(0), WeakTask(0)
    core.schedule(dropped, 5)
    core.schedule(kept, 5)  # neighbours in one bucket
    gone = weakref.ref(dropped)
    if leave == "cancel":
        kept.cancel()  # while `dropped` is still its neighbour
        dropped.cancel()
    elif leave == "expire":
        assert core.advance_to(5) == [dropped, kept]
    else:
        assert core.clear() == [dropped, kept]
    del dropped
    assert gone() is None
    core.schedule(kept, 7)  # a task that left can be scheduled again
    assert core.advance_to(7) == [kept]


def test_clear_returns_everything() -> None:
    core = TimerCore(2, 5, start_ms=0)
    tasks = [Task(i) for i in range(30)]
    for task in tasks:
        core.schedule(task, task.ident * 37 - 5)
    assert {t.ident for t in core.clear()} == set(range(30))
    assert core.size == 0
    assert core.next_deadline() is None


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(0, 20), (1, 1), (-3, 20)])
def test_out_of_range_wheel_parameters(tick_ms: int, wheel_size: int) -> None:
    with pytest.raises(ValueError, match=r"must be an int >= \d"):
        TimerCore(tick_ms, wheel_size)


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(1.5, 20), (True, 20), (1, math.nan)])
def test_wrongly_typed_wheel_parameters(tick_ms: object, wheel_size: object) -> None:
    with pytest.raises(TypeError):  # the compiled build words this its own way
        TimerCore(tick_ms, wheel_size)  # type: ignore[arg-type]


@pytest.mark.parametrize("delay", [1.5, math.nan, "10", None, True])
def test_bad_delay_is_rejected_at_construction(delay: object) -> None:
    with pytest.raises(TypeError, match="delay_ms must be an int"):
        TimerTask(delay)  # type: ignore[arg-type]


class _Index:
    """An int-like delay (``operator.index`` accepts it), off TimerTask's fast path."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(-(2**60), 2**60),
        st.integers(2**53 - 2, 2**53 + 2),
        st.integers(-5, 5).map(_Index),
        st.booleans(),
        st.floats(allow_nan=True),
    )
)
def test_task_delay_fast_path_agrees_with_validate_delay(delay: object) -> None:
    """TimerTask.__init__ takes a plain int without conversion; any delay gets the answer
    ``validate_delay`` gives (the value, or the same exception)."""
    try:
        expected: int | type[Exception] = validate_delay(delay)
    except (TypeError, ValueError) as exc:
        expected = type(exc)
    if isinstance(expected, int):
        task = TimerTask(delay)  # type: ignore[arg-type]
        assert task.delay_ms == expected
        assert not task.is_scheduled
        assert task.expiration_ms == -1
    else:
        with pytest.raises(expected):
            TimerTask(delay)  # type: ignore[arg-type]
