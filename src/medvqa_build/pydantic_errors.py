"""Turn a pydantic ValidationError into one line naming the key, the value and what is allowed."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {key!r}")
        elif err["type"] == "missing":
            parts.append(f"missing key {key!r}")
        else:
            shown = repr(value)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            parts.append(f"{key}={shown}: {msg}")
    return "; ".join(parts)
