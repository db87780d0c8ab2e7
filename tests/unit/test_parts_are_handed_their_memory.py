"""A controller part is handed its own memory of a workload and the facts it reads (the key, the
object, the status), not the whole record: only the modules below take `Workload` itself, and
the few functions that read records across the fleet are named here with why. A write that runs
across awaits reads the object as it is when its turn comes through `LiveWorkload`, which names
only what it reads and writes of the record."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = REPO / "controller"

# Modules whose functions may take the whole record.
RECORD_HOLDERS = {
    "workload.py": "defines the record and the counts over it",
    "reconcile.py": "the orchestrator: it holds the record and hands each part what it needs",
    "assembly.py": "builds the parts and holds the records by key for the callbacks it wires",
}

# Functions elsewhere that take records, each with why.
FLEET_READERS = {
    "accounting.py:Accounting.account_all": "the savings pass over every workload at a scrape",
    "activator.py:Activator.__init__": "the records by key, as its backends and requests name them",
    "activator.py:Activator._cover_of": "one from that map: managed, deleted, asleep, starting",
    "changes.py:ChangeFeed.__init__": "the feed makes the records and keeps their objects fresh",
    "metrics.py:WorkloadSeries.__init__": "each workload's own series, read from every record",
    "metrics.py:Metrics.__init__": "hands the records to its `WorkloadSeries`",
    "registrations.py:ServingIndex.__init__": "the records whose pods a changed Service selects",
    "warming.py:Warming.__init__": "the records a start's warming looks up by key",
}


def _names_record(types: list[ast.expr]) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "Workload" for t in types for n in ast.walk(t))


def takers(source: str) -> list[str]:
    """The functions (`Class.function`) with a parameter whose type names `Workload`, and the
    class fields (`Class.field`) typed with it: a dataclass handed to a part is a parameter too."""
    found: list[str] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{scope}{child.name}.")
            elif isinstance(child, ast.AnnAssign) and isinstance(node, ast.ClassDef):
                if isinstance(child.target, ast.Name) and _names_record([child.annotation]):
                    found.append(f"{scope}{child.target.id}")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                if _names_record([p.annotation for p in params if p is not None and p.annotation]):
                    found.append(f"{scope}{child.name}")
                visit(child, f"{scope}{child.name}.")

    visit(ast.parse(source), "")
    return found


def controller_takers() -> dict[str, list[str]]:
    return {
        path.name: names
        for path in sorted(CONTROLLER.glob("*.py"))
        if (names := takers(path.read_text()))
    }


def test_only_the_record_holders_and_the_named_fleet_readers_take_the_whole_record() -> None:
    others = [
        f"{module}:{name}"
        for module, names in controller_takers().items()
        if module not in RECORD_HOLDERS
        for name in names
    ]
    unexplained = [name for name in others if name not in FLEET_READERS]
    assert unexplained == [], (
        "hand the part its own memory and the facts it reads (key, object, status) instead, "
        "or name it in FLEET_READERS with why"
    )


def test_every_exception_named_still_takes_the_record() -> None:
    taken = {f"{m}:{name}" for m, names in controller_takers().items() for name in names}
    assert sorted(set(FLEET_READERS) - taken) == []
    assert all((CONTROLLER / module).exists() for module in RECORD_HOLDERS)


def test_the_check_finds_a_record_taken_directly_in_a_container_a_callable_or_a_field() -> None:
    source = (
        "class Part:\n"
        "    held: Workload\n"
        "    count: int\n"
        "    def act(self, w: Workload) -> None: ...\n"
        "    async def each(self, ws: Iterable[Workload]) -> None: ...\n"
        "    def told(self, on: Callable[[Workload], None]) -> None: ...\n"
        "    def handed(self, memory: WatchMemory, obj: WorkloadObject) -> None: ...\n"
        "def alone(key: WorkloadKey) -> None: ...\n"
    )
    assert takers(source) == ["Part.held", "Part.act", "Part.each", "Part.told"]
