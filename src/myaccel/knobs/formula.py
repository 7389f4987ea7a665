"""Safe evaluation of the catalog's default formulas.

A formula is a Python expression restricted to integer/float arithmetic, comparisons,
``a if cond else b``, ``and``/``or``/``not``, ``min``/``max``/``round``, the constants
``KiB``, ``MiB``, ``GiB``, ``TiB``, and names. Names are machine facts (``logical_cpus``,
``ram_bytes``) or other knobs of the same server (their own defaults, possibly computed).
Nothing else parses: no attribute access, subscripts, lambdas or other calls. Formulas are
checked when the catalog loads, so a typo fails the catalog tests, not a user's run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from myaccel.units import GiB, KiB, MiB, TiB

MACHINE_NAMES = frozenset({"logical_cpus", "ram_bytes"})
CONSTANTS: Mapping[str, int] = {"KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB}
FUNCTIONS: Mapping[str, Callable[..., int | float]] = {"min": min, "max": max, "round": round}

_BINOPS: Mapping[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a / b,
    ast.Mod: lambda a, b: a % b,
}
_CMPOPS: Mapping[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}

Number = int | float | bool
Resolver = Callable[[str], Number]


class FormulaError(ValueError):
    """A formula that does not parse, uses a forbidden construct or an unknown name."""


@dataclass(frozen=True)
class Formula:
    text: str
    tree: ast.Expression
    names: frozenset[str]

    @property
    def machine_dependent(self) -> bool:
        return bool(self.names & MACHINE_NAMES)

    def evaluate(self, resolve: Resolver) -> Number:
        return _eval(self.tree.body, resolve)


def compile_formula(text: str) -> Formula:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula {text!r} does not parse: {exc.msg}") from exc
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise FormulaError(f"formula {text!r}: only min(), max(), round() may be called")
            if node.keywords:
                raise FormulaError(f"formula {text!r}: keyword arguments are not allowed")
        elif isinstance(node, ast.Name):
            if node.id not in FUNCTIONS and node.id not in CONSTANTS:
                names.add(node.id)
        elif not isinstance(
            node,
            (
                ast.Expression,
                ast.BinOp,
                ast.UnaryOp,
                ast.BoolOp,
                ast.Compare,
                ast.IfExp,
                ast.Constant,
                ast.Load,
                ast.operator,
                ast.unaryop,
                ast.boolop,
                ast.cmpop,
            ),
        ):
            raise FormulaError(f"formula {text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise FormulaError(f"formula {text!r}: operator {type(node.op).__name__} not allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise FormulaError(f"formula {text!r}: only numeric constants are allowed")
    return Formula(text=text, tree=tree, names=frozenset(names))


# An evaluator: one branch per allowed node type of the formula grammar, read as a table.
def _eval(node: ast.expr, resolve: Resolver) -> Number:  # noqa: C901
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, (int, float)):
            return value
        raise FormulaError(f"unexpected constant {value!r}")
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        return resolve(node.id)
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, resolve), _eval(node.right, resolve))
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, resolve)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return +operand
        if isinstance(node.op, ast.Not):
            return not operand
        raise FormulaError(f"unary operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result: Number = True
            for v in node.values:
                result = _eval(v, resolve)
                if not result:
                    return result
            return result
        result = False
        for v in node.values:
            result = _eval(v, resolve)
            if result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, resolve)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, resolve)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        if _eval(node.test, resolve):
            return _eval(node.body, resolve)
        return _eval(node.orelse, resolve)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_eval(a, resolve) for a in node.args]
        return FUNCTIONS[node.func.id](*args)
    raise FormulaError(f"{type(node).__name__} is not allowed in a formula")
