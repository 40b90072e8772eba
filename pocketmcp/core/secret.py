"""A value that must never be printed or logged: a token, an API key, a database URL."""

from __future__ import annotations


class Secret:
    """A value that must never be printed or logged (a token, an API key): its repr and str
    hide it; `reveal()` gives it where it is sent."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        # An f-string that would send "Secret('***')" as the value is a bug: fail loudly.
        raise TypeError("a Secret is sent with .reveal(); it is never formatted")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
