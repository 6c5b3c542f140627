"""import-linter's contract for what its own types cannot say: no import cycle among the modules of a package
(DESIGN §9, imports point one way). Its acyclic_siblings contract compares packages as wholes; this one finds a
circle of modules, wherever in the package it runs (through any app, module- or function-level imports alike).

Configured in pyproject.toml ([tool.importlinter]); `make lint` runs it."""
from __future__ import annotations

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AcyclicModulesContract(Contract):
    type_name = "acyclic_modules"

    package = fields.StringField()

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        package = str(self.package)
        modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
        edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules and i != m} for m in modules}
        cycles = [sorted(c) for c in _strongly_connected(edges) if len(c) > 1]
        return ContractCheck(kept=not cycles, warnings=None, metadata={"cycles": sorted(cycles)})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error("These modules import each other in a circle: " + ", ".join(cycle))
            output.new_line()


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(group)
    return groups
