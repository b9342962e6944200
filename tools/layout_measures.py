"""The layout measures the restructuring step reports, read from the code as text and AST.

    python tools/layout_measures.py [--json]

- import circles among library modules (strongly connected groups of two or
  more files), counting imports under ``TYPE_CHECKING`` and inside functions;
- ``from x import _y`` across modules (a private name taken from another file);
- reads of another object's private attribute (``obj._x`` where ``obj`` is
  not ``self``/``cls``), per 1,000 lines;
- ``Any`` mentions in the library;
- the largest folder's share of the library's lines;
- test files over 600 lines.

Duplicate pairs are not counted here: they come from a separate tool
(`duplicates`), whose row count is quoted in the step's note.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llmchat"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module an ``from ... import`` names."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def library_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def imports_of(path: Path, modules: set[str]) -> tuple[set[str], list[str]]:
    """The library modules `path` imports, and the private names it takes from them."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    private: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(me, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    found.add(sub)
                elif target in modules:
                    found.add(target)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append(f"{me}: from {target} import {alias.name}")
    found.discard(me)
    return found, private


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Any]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    result.append(sorted(group))
    return result


def private_reads(path: Path) -> int:
    """``x._name`` reads where ``x`` is not ``self``/``cls`` (dunders excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    count = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or attr.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
            continue
        count += 1
    return count


def measure() -> dict[str, Any]:
    files = library_files()
    modules = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    private_imports: list[str] = []
    lines = 0
    reads = 0
    anys = 0
    folders: Counter[str] = Counter()
    for path in files:
        found, private = imports_of(path, modules)
        graph[module_name(path)] = found
        private_imports.extend(private)
        text = path.read_text(encoding="utf-8")
        count = text.count("\n")
        lines += count
        folders[str(path.parent.relative_to(ROOT))] += count
        reads += private_reads(path)
        tree = ast.parse(text)
        anys += sum(
            1
            for node in ast.walk(tree)
            if (isinstance(node, ast.Name) and node.id == "Any")
            or (isinstance(node, ast.Attribute) and node.attr == "Any")
        )
    found_circles = circles(graph)
    largest, largest_lines = folders.most_common(1)[0]
    tests = sorted(
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8").count("\n"))
        for p in (ROOT / "tests").rglob("*.py")
        if "node_modules" not in p.parts
    )
    long_tests = [(name, count) for name, count in tests if count > 600]
    return {
        "library_lines": lines,
        "import_circles": len(found_circles),
        "circles": found_circles,
        "private_imports_across_modules": len(private_imports),
        "private_imports": private_imports,
        "private_reads": reads,
        "private_reads_per_1000_lines": round(1000 * reads / lines, 2),
        "any_mentions": anys,
        "largest_folder": largest,
        "largest_folder_share": round(largest_lines / lines, 3),
        "test_files": len(tests),
        "test_files_over_600_lines": len(long_tests),
        "long_tests": long_tests,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="everything, as JSON")
    args = parser.parse_args(argv)
    result = measure()
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    for key, value in result.items():
        if isinstance(value, list):
            continue
        print(f"{key}: {value}")
    for group in result["circles"]:
        print("circle:", " ".join(group))
    return 0


if __name__ == "__main__":
    sys.exit(main())
