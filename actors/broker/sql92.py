"""SQL92 message filters: parse a consumer's `MessageSelector.bySql` expression and evaluate it
against a message's properties.

Mirrors filter/src/main/java/org/apache/rocketmq/filter (SelectorParser grammar and the
expression classes: ComparisonExpression, LogicExpression, UnaryExpression), RocketMQ 4.9.x.
Grammar, loosest first:

    or:       and (OR and)*
    and:      equality (AND equality)*
    equality: comparison ((= | <>) comparison | IS [NOT] NULL)*
    comparison: unary ((> | >= | < | <=) unary | [NOT] BETWEEN unary AND unary
                | [NOT] IN (string, ...) | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string)*
    unary:    NOT unary | + unary | - unary | primary
    primary:  literal | identifier | ( or )

Literals: 'text' ('' is a quote), integers (0 or no leading zero), decimals and exponents, TRUE,
FALSE, NULL; `--` and `/* */` comments are skipped. Keywords are case-insensitive; identifiers
([A-Za-z_$][A-Za-z0-9_$]*) are property names (TAGS and KEYS included: the broker evaluates the
message's property map). A property used where a boolean is expected is cast as Java does
(NULL stays NULL, any text is FALSE). AND / OR chains evaluate iteratively.

Values are three-valued as in SQL: a missing property is NULL, a comparison with NULL is NULL,
and only TRUE matches. A property is text; compared with a number it is read as that number
(Integer/Long.valueOf for an integer literal of that range, Double.valueOf for a decimal), with
a boolean as Java's Boolean.valueOf, and two texts in <, <=, >, >= are both read as decimals
(ComparisonExpression). A value that cannot be converted makes the evaluation fail,
which the broker counts as no match (ExpressionMessageFilter logs and skips).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

Value = Any  # str | int | float | bool | None
Node = Callable[[Mapping[str, str]], Value]

_TOKEN: Final = re.compile(
    r"""(?:
      (?P<str>'(?:[^']|'')*')
    | (?P<num>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|0(?![0-9])|[1-9]\d*)
    | (?P<op><>|>=|<=|=|>|<|\(|\)|,|\+|-)
    | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
    )""",
    re.VERBOSE,
)
# SelectorParser.jj keywords (case-insensitive); CONTAINS / STARTSWITH / ENDSWITH are RocketMQ
# 5's additions, accepted here as well
_KEYWORDS: Final = frozenset(
    {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE",
     "CONTAINS", "STARTSWITH", "ENDSWITH"}
)  # fmt: skip
_JAVA_INT: Final = re.compile(r"[+-]?\d+\Z")
_JAVA_DOUBLE: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)\Z"
)
_INT32: Final = (-(1 << 31), (1 << 31) - 1)
_INT64: Final = (-(1 << 63), (1 << 63) - 1)


class Sql92Error(ValueError):
    """The expression does not parse or cannot be evaluated (MQFilterException)."""


def _skip(text: str, pos: int) -> int:
    """Past whitespace and comments (-- to the end of the line, /* */): linear, no regex."""
    n = len(text)
    while pos < n:
        c = text[pos]
        if c.isspace():
            pos += 1
        elif text.startswith("--", pos):
            nl = text.find("\n", pos)
            pos = n if nl < 0 else nl + 1
        elif text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            if end < 0:
                raise Sql92Error(f"unterminated comment at {pos}")
            pos = end + 2
        else:
            break
    return pos


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    n = len(text)
    pos = _skip(text, 0)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            raise Sql92Error(f"unexpected character at {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        tok = m.group(kind)
        if kind == "num" and pos < n and (text[pos].isalnum() or text[pos] in "_$."):
            raise Sql92Error(f"bad number at {m.start(kind)}: {text[m.start(kind):pos + 1]!r}")
        if kind == "id" and tok.upper() in _KEYWORDS:
            out.append(("kw", tok.upper()))
        else:
            out.append((kind, tok))
        pos = _skip(text, pos)
    out.append(("end", ""))
    return out


def _number(tok: str) -> int | float:
    """A literal as ConstantExpression.createFromDecimal / createFloat read it."""
    try:
        if "." in tok or "e" in tok or "E" in tok:
            return float(tok)
        v = int(tok)
    except ValueError:
        raise Sql92Error(f"bad number {tok!r}") from None
    if not _INT64[0] <= v <= _INT64[1]:
        raise Sql92Error(f"number out of range {tok!r}")
    return v


def _java_bool(s: str) -> bool:
    return s.lower() == "true"


def _to_number(s: str, like: int | float) -> int | float:
    """Integer.valueOf / Long.valueOf / Double.valueOf of a property, by the literal's type."""
    if isinstance(like, int):
        lo, hi = _INT32 if _INT32[0] <= like <= _INT32[1] else _INT64
        if _JAVA_INT.match(s):
            v = int(s)
            if lo <= v <= hi:
                return v
        raise Sql92Error(f"{s!r} is not an integer in range")
    return _to_double(s)


def _to_double(s: str) -> float:
    t = s.strip()
    if not _JAVA_DOUBLE.match(t):
        raise Sql92Error(f"{s!r} is not a number")
    if t[-1] in "fFdD":
        t = t[:-1]
    return float(t.replace("Infinity", "inf"))


def _coerce(lv: Value, rv: Value) -> tuple[Value, Value] | None:
    """Bring two values to one type (ComparisonExpression.__compare); None: not comparable."""
    if type(lv) is type(rv):
        return lv, rv
    if isinstance(lv, str):
        if isinstance(rv, bool):
            return _java_bool(lv), rv
        if isinstance(rv, int | float):
            return _to_number(lv, rv), rv
        return None
    if isinstance(rv, str):
        if isinstance(lv, bool):
            return lv, _java_bool(rv)
        if isinstance(lv, int | float):
            return lv, _to_number(rv, lv)
        return None
    if isinstance(lv, bool) or isinstance(rv, bool):
        return None
    return float(lv), float(rv)  # int against float


def _compare(lv: Value, rv: Value) -> int:
    pair = _coerce(lv, rv)
    if pair is None:
        return -1  # as Java: unrelated types compare "less"
    a, b = pair
    return (a > b) - (a < b)


def _ordering(op: str, left: Node, right: Node) -> Node:
    test: Callable[[int], bool] = {
        ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
    }[op]  # fmt: skip

    def node(props: Mapping[str, str]) -> Value:
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = _to_double(lv), _to_double(rv)
        return test(_compare(lv, rv))

    return node


def _equal(left: Node, right: Node) -> Node:
    def node(props: Mapping[str, str]) -> Value:
        lv = left(props)
        rv = right(props)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if type(lv) is type(rv) and lv == rv:
            return True
        return _compare(lv, rv) == 0

    return node


def _bool(v: Value) -> Value:
    """UnaryExpression.createBooleanCast: NULL stays NULL, a non-boolean value is FALSE."""
    return v if v is None or isinstance(v, bool) else False


def _not(inner: Node) -> Node:
    def node(props: Mapping[str, str]) -> Value:
        v = _bool(inner(props))
        return None if v is None else not v

    return node


def _chain(parts: list[Node], decisive: bool) -> Node:
    """A flat AND (decisive=False) or OR (decisive=True) chain in SQL's three-valued logic:
    the decisive value wins at once, else NULL if any part was NULL. Iterative, so a long chain
    never recurses."""
    if len(parts) == 1:
        return parts[0]

    def node(props: Mapping[str, str]) -> Value:
        unknown = False
        for part in parts:
            v = _bool(part(props))
            if v is decisive:
                return decisive
            if v is None:
                unknown = True
        return None if unknown else not decisive

    return node


def _and(parts: list[Node]) -> Node:
    """LogicExpression.createAND over a flat chain."""
    return _chain(parts, False)


def _or(parts: list[Node]) -> Node:
    """LogicExpression.createOR over a flat chain."""
    return _chain(parts, True)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, kind: str, value: str | None = None, ahead: int = 0) -> bool:
        k, v = self.toks[self.i + ahead] if self.i + ahead < len(self.toks) else ("end", "")
        return k == kind and (value is None or v == value)

    def take(self, kind: str, value: str | None = None) -> str:
        if not self.peek(kind, value):
            k, v = self.toks[self.i]
            want = value or kind
            raise Sql92Error(f"expected {want} at token {self.i}, found {v or k!r}")
        v = self.toks[self.i][1]
        self.i += 1
        return v

    def parse(self) -> Node:
        node, const = self.or_expr()
        self.take("end")
        node = self._boolean(node, const)
        return lambda props: _bool(node(props))

    def or_expr(self) -> tuple[Node, tuple[Value] | None]:
        return self._joined("OR", self.and_expr, _or)

    def and_expr(self) -> tuple[Node, tuple[Value] | None]:
        return self._joined("AND", self.equality, _and)

    def _joined(
        self,
        keyword: str,
        operand: Callable[[], tuple[Node, tuple[Value] | None]],
        combine: Callable[[list[Node]], Node],
    ) -> tuple[Node, tuple[Value] | None]:
        """operand (keyword operand)*: one flat three-valued chain when the keyword appears."""
        parts = [operand()]
        while self.peek("kw", keyword):
            self.i += 1
            parts.append(operand())
        if len(parts) == 1:
            return parts[0]
        return combine([self._boolean(n, c) for n, c in parts]), None

    @staticmethod
    def _boolean(node: Node, const: tuple[Value] | None) -> Node:
        """asBooleanExpression: a number or text literal can never be a condition."""
        if const is not None and not (const[0] is None or isinstance(const[0], bool)):
            raise Sql92Error(f"{const[0]!r} will not result in a boolean value")
        return node

    def equality(self) -> tuple[Node, tuple[Value] | None]:
        node, const = self.comparison()
        while True:
            if self.peek("op", "=") or self.peek("op", "<>"):
                op = self.take("op")
                right, rconst = self.comparison()
                for c in (const, rconst):
                    if c is not None and c[0] is None:
                        raise Sql92Error("NULL cannot be compared with = or <>; use IS NULL")
                eq = _equal(node, right)
                node, const = (eq if op == "=" else _not(eq)), None
            elif self.peek("kw", "IS"):
                self.i += 1
                negate = self.peek("kw", "NOT")
                if negate:
                    self.i += 1
                self.take("kw", "NULL")
                inner = node
                is_null = _equal(inner, lambda _p: None)
                node, const = (_not(is_null) if negate else is_null), None
            else:
                return node, const

    def comparison(self) -> tuple[Node, tuple[Value] | None]:
        node, const = self.unary()
        while True:
            if self.peek("op") and self.toks[self.i][1] in (">", ">=", "<", "<="):
                op = self.take("op")
                right, rconst = self.unary()
                for c in (const, rconst):
                    if c is not None and (
                        not isinstance(c[0], int | float) or isinstance(c[0], bool)
                    ):
                        raise Sql92Error(f"value {c[0]!r} cannot be compared with {op}")
                node, const = _ordering(op, node, right), None
                continue
            negate = self.peek("kw", "NOT") and not self.peek("end", ahead=1)
            if negate and not any(self.peek("kw", k, 1) for k in
                                  ("BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH")):
                return node, const  # fmt: skip
            if negate:
                self.i += 1
            if self.peek("kw", "BETWEEN"):
                self.i += 1
                low, lconst = self.unary()
                self.take("kw", "AND")
                high, hconst = self.unary()
                if lconst is not None and hconst is not None:
                    if lconst[0] is None or hconst[0] is None:
                        raise Sql92Error("BETWEEN bounds cannot be NULL")
                    if _compare(hconst[0], lconst[0]) < 0:
                        raise Sql92Error("BETWEEN: the low bound is above the high bound")
                if negate:
                    node = _or([_ordering("<", node, low), _ordering(">", node, high)])
                else:
                    node = _and([_ordering(">=", node, low), _ordering("<=", node, high)])
                const = None
            elif self.peek("kw", "IN"):
                self.i += 1
                self.take("op", "(")
                items = {self._string()}
                while self.peek("op", ","):
                    self.i += 1
                    items.add(self._string())
                self.take("op", ")")
                node, const = _in(node, frozenset(items), negate), None
            elif any(self.peek("kw", k) for k in ("CONTAINS", "STARTSWITH", "ENDSWITH")):
                kind = self.take("kw")
                node, const = _text_test(kind, node, self._string(), negate), None
            else:
                return node, const

    def _string(self) -> str:
        return self.take("str")[1:-1].replace("''", "'")

    def unary(self) -> tuple[Node, tuple[Value] | None]:
        if self.peek("kw", "NOT"):
            self.i += 1
            inner, const = self.unary()
            return _not(self._boolean(inner, const)), None
        if self.peek("op", "+"):
            self.i += 1
            return self.unary()
        if self.peek("op", "-"):
            self.i += 1
            inner, const = self.unary()
            if const is None or not isinstance(const[0], int | float) or isinstance(
                const[0], bool
            ):
                raise Sql92Error("unary minus applies to a number literal only")
            v = -const[0]
            return (lambda _p: v), (v,)
        return self.primary()

    def primary(self) -> tuple[Node, tuple[Value] | None]:
        kind, tok = self.toks[self.i]
        if kind == "op" and tok == "(":
            self.i += 1
            node, const = self.or_expr()
            self.take("op", ")")
            return node, const
        self.i += 1
        value: Value
        if kind == "str":
            value = tok[1:-1].replace("''", "'")
        elif kind == "num":
            value = _number(tok)
        elif kind == "kw" and tok in ("TRUE", "FALSE"):
            value = tok == "TRUE"
        elif kind == "kw" and tok == "NULL":
            value = None
        elif kind == "id":
            name = tok
            return (lambda props: props.get(name)), None
        else:
            raise Sql92Error(f"unexpected {tok or kind!r} at token {self.i - 1}")
        v = value
        return (lambda _p: v), (v,)


def _in(left: Node, items: frozenset[str], negate: bool) -> Node:
    def node(props: Mapping[str, str]) -> Value:
        v = left(props)
        if v is None or not isinstance(v, str):
            return None
        return (v in items) != negate

    return node


def _text_test(kind: str, left: Node, text: str, negate: bool) -> Node:
    def node(props: Mapping[str, str]) -> Value:
        v = left(props)
        if v is None or not isinstance(v, str):
            return None
        if kind == "CONTAINS":
            hit = text in v
        elif kind == "STARTSWITH":
            hit = v.startswith(text)
        else:
            hit = v.endswith(text)
        return hit != negate

    return node


class Sql92Filter:
    """A compiled SQL92 expression; matches(properties) is True only for a TRUE result."""

    __slots__ = ("_node", "expression")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self._node = _Parser(expression).parse()

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        """The expression's value (True, False or None); raises Sql92Error when it fails."""
        try:
            return self._node(properties)
        except Sql92Error:
            raise
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise Sql92Error(f"{type(exc).__name__}: {exc}") from exc

    def matches(self, properties: Mapping[str, str]) -> bool:
        """True when the expression is TRUE (NULL, FALSE and failures do not match)."""
        try:
            return self.evaluate(properties) is True
        except Exception:  # ExpressionMessageFilter: an evaluation error is no match
            return False


def compile_sql92(expression: str) -> Sql92Filter:
    """Parse an expression; raises Sql92Error with the reason when it does not parse."""
    if not expression or not expression.strip():
        raise Sql92Error("empty expression")
    try:
        return Sql92Filter(expression)
    except RecursionError:
        raise Sql92Error("expression nests too deeply") from None
    except Sql92Error:
        raise
    except (ValueError, TypeError) as exc:
        raise Sql92Error(f"{type(exc).__name__}: {exc}") from None


class SubscriptionRefused(Exception):
    """A non-TAG subscription this broker will not serve: the response code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def compile_subscription(
    expression_type: str, text: str | None, property_filter: bool
) -> Sql92Filter:
    """The filter of a non-TAG subscription (pulls and CHECK_CLIENT_CONFIG alike), or
    SubscriptionRefused: SYSTEM_ERROR without enablePropertyFilter, SUBSCRIPTION_PARSE_FAILED for
    another expression type or an expression that does not parse."""
    from protocol.bodies import EXPRESSION_TYPE_SQL92
    from protocol.codes import ResponseCode

    if not property_filter:
        raise SubscriptionRefused(
            ResponseCode.SYSTEM_ERROR,
            f"The broker does not support consumer to filter message by {expression_type}",
        )
    if expression_type != EXPRESSION_TYPE_SQL92:
        raise SubscriptionRefused(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"the expression type {expression_type!r} is not supported",
        )
    try:
        return compile_sql92(text or "")
    except Sql92Error as e:
        raise SubscriptionRefused(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"parse the consumer's subscription failed: {e}",
        ) from e
