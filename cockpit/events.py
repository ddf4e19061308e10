"""The one way anything in the cockpit tells others what happened: a Topic.

Collectors publish (the command log, the telemetry hub, the runbook, a sweep); subscribers get
every item, in order, on the publisher's thread (the event loop).  Data flows one way: the core
publishes, the shells (the TUI posts messages, the CLI prints) subscribe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Topic(Generic[T]):
    __slots__ = ("_subscribers",)

    def __init__(self) -> None:
        self._subscribers: list[Callable[[T], object]] = []  # what a subscriber returns is not read

    def subscribe(self, subscriber: Callable[[T], object]) -> Callable[[], None]:
        """Add a subscriber; returns the function that removes it."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def publish(self, item: T) -> None:
        for subscriber in list(self._subscribers):
            subscriber(item)

    def __len__(self) -> int:
        return len(self._subscribers)
