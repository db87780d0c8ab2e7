"""The controller's parts are built from six things or fewer, and none is wired after it is built:
what most parts share comes as one `Context`, related dependencies as one small typed value."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = REPO / "controller"
MOST = 6
# Records of values, not dependencies: a flag each, a part's memory of one workload, or the
# object kept of it.
RECORDS = {"ControllerSettings", "WatchMemory", "IdleMemory", "WorkloadCounts", "WorkloadObject"}


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id == "dataclass":
            return True
    return False


def _fields(node: ast.ClassDef) -> list[str]:
    """A dataclass's fields: its annotated names, ClassVars left out."""
    return [
        item.target.id
        for item in node.body
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and "ClassVar" not in ast.unparse(item.annotation)
    ]


def _parameters(init: ast.FunctionDef) -> list[str]:
    """What `__init__` takes besides self."""
    args = init.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]
    rest = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in (*named, *rest)]


def constructors(source: str) -> dict[str, list[str]]:
    """Each class's constructor parameters: its own `__init__`, or a dataclass's fields."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        inits = [i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"]
        if inits:
            found[node.name] = _parameters(inits[0])
        elif _is_dataclass(node):
            found[node.name] = _fields(node)
    return found


def assignments_into_parts(source: str) -> list[str]:
    """Lines that set an attribute of something held on `self` (`self.part.callback = ...`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Attribute)
                and isinstance(target.value.value, ast.Name)
                and target.value.value.id == "self"
            ):
                found.append(ast.unparse(node))
    return found


MODULES = sorted(p.name for p in CONTROLLER.glob("*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_every_constructor_in_the_controller_takes_six_things_or_fewer(module: str) -> None:
    built = constructors((CONTROLLER / module).read_text())
    over = {
        name: params for name, params in built.items() if len(params) > MOST and name not in RECORDS
    }
    assert over == {}, "group related dependencies into a small typed value, or take the Context"


def test_the_assembly_wires_no_part_after_building_it() -> None:
    assert assignments_into_parts((CONTROLLER / "assembly.py").read_text()) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "class A:\n    def __init__(self, a, b, *, c=1, **more): ...",
            {"A": ["a", "b", "c", "more"]},
        ),
        (
            "@dataclass(frozen=True)\nclass B:\n    x: int\n    y: ClassVar[int] = 0\n    z: str",
            {"B": ["x", "z"]},
        ),
        ("class C:\n    pass", {}),
    ],
)
def test_a_constructor_is_read_as_its_parameters_or_a_dataclass_as_its_fields(
    source: str, expected: dict[str, list[str]]
) -> None:
    assert constructors(source) == expected


def test_a_part_wired_after_it_is_built_is_found() -> None:
    source = "class S:\n    def __init__(self):\n        self.feed.on_change = self.warm\n"
    assert assignments_into_parts(source) == ["self.feed.on_change = self.warm"]
