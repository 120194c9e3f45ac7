"""The rules every registry of plug-ins by name follows: design spaces here, cost models and
search strategies above, so each refuses the same mistakes with the same words."""

from __future__ import annotations

from collections.abc import Container

#: Names are shown in messages and stored in records (a space's), so they stay short and plain.
MAX_NAME_CHARS = 200


def check_registration(
    kind: str,
    name: object,
    factory: object,
    registered: Container[str],
    replace: bool,
    error: type[Exception],
) -> None:
    """Raise ``error`` unless ``name`` is a good name (``check_name``), ``factory`` is callable
    and the name is free (or ``replace`` is set): two plug-ins must not shadow each other, or a
    built-in, by accident."""
    check_name(kind, name, error)
    if not callable(factory):
        raise error(f"{kind} '{name}': the factory must be callable, got {factory!r:.80}")
    if name in registered and not replace:
        raise error(f"{kind} '{name}' is already registered (pass replace=True to replace it)")


def check_name(kind: str, name: object, error: type[Exception]) -> None:
    """Raise ``error`` unless ``name`` is a printable string of 1 to MAX_NAME_CHARS characters."""
    if (
        not isinstance(name, str)
        or not name
        or not name.isprintable()
        or len(name) > MAX_NAME_CHARS
    ):
        raise error(
            f"{kind}: the name must be a printable string of 1 to {MAX_NAME_CHARS} "
            f"characters, got {name!r:.80}"
        )


def check_made(kind: str, name: str, made: object, cls: type, error: type[Exception]) -> None:
    """Raise ``error`` unless the plug-in ``name``'s factory made a ``cls``."""
    if not isinstance(made, cls):
        raise error(
            f"{kind} '{name}': its factory returned a {type(made).__name__}, not a {cls.__name__}"
        )
