"""A verdict's reason: why it rejects, as a kind and a detail (`banned:sorry`), parsed here and
nowhere else; a `str`, so a verdict file keeps its text."""

from __future__ import annotations

import re
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["Reason", "reason_kind"]

_REASON = re.compile(r"[a-z][a-z0-9_]*(?::.*)?", re.DOTALL)


class Reason(str):
    """Why a verdict rejects: a `kind`, and a `detail` after the first colon (`banned:sorry`:
    kind `banned`, detail `sorry`; `statement_mismatch`: no detail). A `str`, so a verdict file
    keeps its text; its shape is parsed here and nowhere else, and one of another shape (a kind
    that is no snake_case word) is refused where a record is read or made."""

    @classmethod
    def parse(cls, text: str) -> Reason:
        """`text` as a reason; raises ValueError naming it if it is not `kind[:detail]`."""
        if not _REASON.fullmatch(text):
            raise ValueError(
                f"{text!r} is not a reason: `kind` or `kind:detail`, kind in snake_case"
            )
        return cls(text)

    @property
    def kind(self) -> str:
        return self.partition(":")[0]

    @property
    def detail(self) -> str | None:
        """What follows the kind; None for a bare kind."""
        _, colon, detail = self.partition(":")
        return detail if colon else None

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls.parse, core_schema.str_schema())


def reason_kind(reason: str) -> str:
    """The kind of a reason written `kind:detail` or a bare `kind` (`banned:sorry` -> `banned`,
    `by_count:2 markers` -> `by_count`): `Reason.parse(reason).kind`, for the readers that
    count or filter reasons kept as text (a statement's parse, a gate's list)."""
    return Reason.parse(reason).kind
