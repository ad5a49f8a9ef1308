"""FilterAPI: common/filter/FilterAPI.java of RocketMQ 4.9.x (buildSubscriptionData): a
subscription from a tag expression ("*", "TagA || TagB") or an SQL92 one. A caller that does
not say which is it gets TAG unless the expression has SQL syntax (a comparison, AND / OR,
BETWEEN, IN, IS, NOT)."""

from __future__ import annotations

from protocol.bodies import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, SubscriptionData

SQL_MARKS = (" and ", " or ", " between ", " in ", " is ", " not ", "=", ">", "<")


def guess_type(expression: str) -> str:
    """TAG or SQL92 for an expression given without its type."""
    e = (expression or "").strip()
    if e in ("", "*"):
        return EXPRESSION_TYPE_TAG
    low = f" {e.lower()} "
    return EXPRESSION_TYPE_SQL92 if any(w in low for w in SQL_MARKS) else EXPRESSION_TYPE_TAG


def build_subscription(topic: str, expression: str, expression_type: str | None,
                       version: int) -> SubscriptionData:  # fmt: skip
    """buildSubscriptionData; ValueError for an unknown type or an empty SQL92 expression."""
    etype = (expression_type or guess_type(expression)).upper()
    if etype == EXPRESSION_TYPE_TAG:
        return SubscriptionData.build(topic, expression, version)
    if etype == EXPRESSION_TYPE_SQL92:
        if not expression or not expression.strip():
            raise ValueError("an SQL92 subscription needs an expression")
        return SubscriptionData(topic, expression.strip(), [], [], version, EXPRESSION_TYPE_SQL92)
    raise ValueError(f"expression type {etype!r}: TAG or SQL92")
