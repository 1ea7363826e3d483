"""Errors a user can act on: each says what was wrong and what to do."""


class FlybenchError(Exception):
    """Bad input or an environment problem; the message is shown as is."""


def unknown_name(kind: str, name: str, valid: list[str] | tuple[str, ...]) -> FlybenchError:
    """An error for a name that is not in a registry, listing the valid names."""
    return FlybenchError(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(sorted(valid))}")
