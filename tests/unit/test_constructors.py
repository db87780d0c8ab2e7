"""The product's parts are built from six things or fewer, and none is wired after it is built:
what most controller parts share comes as one `Context`, related dependencies or settings as one
small typed value. Records of values (settings, memories, documents, rows) are named below."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("controller", "webhook", "certs", "zeroscaler")
LINKS = ("zeroscaler/controller/", "zeroscaler/webhook/", "zeroscaler/certs/")
MOST = 6
# Records of values, not parts: data handed over or kept, with no dependency and no wiring.
RECORDS = {
    "controller/flags.py:ControllerSettings": "the controller's flags, a value each",
    "controller/watch_memory.py:WatchMemory": "the watches' memory of one workload",
    "controller/idle_memory.py:IdleMemory": "the idle clock's memory of one workload",
    "controller/report_memory.py:WorkloadCounts": "the reports' tallies of one workload",
    "controller/workload_object.py:WorkloadObject": "what is kept of one workload's object",
    "certs/renewer.py:RenewerConfig": "where the Secret and the files are, how long pairs last",
    "zeroscaler/api/credentials.py:ClusterAccess": "where the API server is and who we are",
    "zeroscaler/cli/status.py:Row": "one line of `zeroscaler status`",
    "zeroscaler/cli/status.py:Savings": "one namespace's line of `zeroscaler status`",
    "zeroscaler/cli/workload_view.py:KindScope": "a watched kind, as `explain` shows it",
    "zeroscaler/cli/workload_view.py:WorkloadView": "a workload, as `explain` shows it",
    "zeroscaler/core/activity.py:Interest": "what is activity for a workload",
    "zeroscaler/core/activity.py:MetadataOnly": "an object watched as metadata",
    "zeroscaler/core/annotations.py:WorkloadConfig": "a workload's annotations read into values",
    "zeroscaler/core/decision.py:Observed": "the decision's input",
    "zeroscaler/core/decision.py:Decision": "the decision's output",
    "zeroscaler/core/kinds.py:APIResource": "one served type, as discovery names it",
    "zeroscaler/core/matching.py:Attributes": "what webhook rules match of a request",
    "zeroscaler/core/schedules.py:Window": "one schedule window of the policy",
    "zeroscaler/core/policy.py:Rule": "one rule of a policy document",
    "zeroscaler/core/policy.py:PolicyDocument": "one policy ConfigMap, parsed",
    "zeroscaler/core/policy.py:Policy": "the policy documents merged",
    "zeroscaler/core/policy.py:Effective": "the policy that applies to one workload",
}


def product_modules() -> list[str]:
    """Every product module once: the folders at the top, not again through their links."""
    found = set()
    for folder in FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            relative = path.relative_to(REPO).as_posix()
            if not relative.startswith(LINKS):
                found.add(relative)
    return sorted(found)


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id == "dataclass":
            return True
    return False


def _fields(node: ast.ClassDef) -> list[str]:
    """A dataclass's fields its constructor takes: its annotated names, ClassVars and
    `field(init=False)` left out."""
    return [
        item.target.id
        for item in node.body
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and "ClassVar" not in ast.unparse(item.annotation)
        and not _kept_out_of_init(item.value)
    ]


def _kept_out_of_init(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    return any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in value.keywords
    )


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


def _attributes_set(source: str) -> Iterator[tuple[ast.Assign, ast.Attribute]]:
    """Each assignment to an attribute, with the attribute it sets."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute):
                    yield node, target


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def assignments_into_parts(source: str) -> list[str]:
    """Lines that set an attribute of something held on `self` (`self.part.callback = ...`)."""
    return [
        ast.unparse(node)
        for node, target in _attributes_set(source)
        if isinstance(target.value, ast.Attribute) and _is_self(target.value.value)
    ]


def callbacks_set_on_others(source: str) -> list[str]:
    """Lines that set a callback (`on_...`) of an object other than `self`."""
    return [
        ast.unparse(node)
        for node, target in _attributes_set(source)
        if target.attr.startswith("on_") and not _is_self(target.value)
    ]


MODULES = product_modules()


def _constructors_over(module: str) -> dict[str, list[str]]:
    """The classes of `module` built from more than six things, as `module:Class`."""
    built = constructors((REPO / module).read_text())
    return {f"{module}:{name}": params for name, params in built.items() if len(params) > MOST}


@pytest.mark.parametrize("module", MODULES)
def test_every_constructor_in_the_product_takes_six_things_or_fewer(module: str) -> None:
    over = {name: p for name, p in _constructors_over(module).items() if name not in RECORDS}
    assert over == {}, "group related dependencies into a small typed value, or take the Context"


def test_each_record_named_is_still_there_and_takes_more_than_six() -> None:
    over = {name for module in MODULES for name in _constructors_over(module)}
    assert sorted(RECORDS.keys() - over) == []


@pytest.mark.parametrize("module", MODULES)
def test_no_part_wires_a_part_it_holds_after_building_it(module: str) -> None:
    assert assignments_into_parts((REPO / module).read_text()) == []


def test_no_callback_is_set_after_its_object_is_built_but_those_named() -> None:
    found = {
        (module, line)
        for module in MODULES
        for line in callbacks_set_on_others((REPO / module).read_text())
    }
    assert sorted(found) == [], "hand the callback to the constructor, or read it at the source"


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
        (
            "@dataclass\nclass D:\n    x: int\n    n: int = field(default=0, init=False)",
            {"D": ["x"]},
        ),
    ],
)
def test_a_constructor_is_read_as_its_parameters_or_a_dataclass_as_its_fields(
    source: str, expected: dict[str, list[str]]
) -> None:
    assert constructors(source) == expected


def test_a_part_wired_after_it_is_built_is_found() -> None:
    source = "class S:\n    def __init__(self):\n        self.feed.on_change = self.warm\n"
    assert assignments_into_parts(source) == ["self.feed.on_change = self.warm"]


def test_a_callback_set_on_another_object_is_found() -> None:
    source = "def wire(renewer, reloader):\n    renewer.on_change = reloader.check\n"
    assert callbacks_set_on_others(source) == ["renewer.on_change = reloader.check"]
    assert (
        callbacks_set_on_others("class S:\n    def __init__(self):\n        self.on_x = f\n") == []
    )
