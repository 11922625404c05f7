"""The layout shows the architecture: dependencies go one way, no import cycles, no module
that mixes concerns by size, no import-time side effects, docstrings cite only what is here.

Layers, lowest first: errors/_io/config → data → weighting, privacy → solvers → metrics,
model → train → apps. ``experiments/``, ``scripts/`` and the measurement harness
``benchmarks/`` sit outside the package and nothing in them is imported by ``dpmt``; the
harness's ``dpmt bench`` / ``dpmt quality`` reach the CLI as entry points.
"""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "dpmt"
MAX_LINES = 600


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(path: pathlib.Path, known: set[str]) -> set[str]:
    """Every dpmt module ``path`` imports, at module level or inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("dpmt"):
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("dpmt"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in known else node.module)
    return {m for m in out if m in known}


def _graph():
    mods = _modules()
    known = set(mods)
    return {m: _imports(p, known) - {m} for m, p in mods.items()}


def _sccs(graph):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    g = _graph()
    # a package's __init__ re-exports its submodules; an edge from a submodule to its own
    # package's __init__ is the re-export, not a cycle of the design
    for m in g:
        g[m] = {t for t in g[m] if not m.startswith(t + ".")}
    cycles = [sorted(c) for c in _sccs(g) if len(c) > 1]
    assert cycles == []


def test_a_cycle_is_detected():
    """The detector itself can fail."""
    assert [sorted(c) for c in _sccs({"a": {"b"}, "b": {"a"}, "c": set()}) if len(c) > 1] \
        == [["a", "b"]]


LAYER = {  # a module may import only from layers at or below its own
    "dpmt.errors": 0, "dpmt._io": 0, "dpmt.config": 1, "dpmt.config_schema": 1,
    "dpmt.config_groups": 1,
    "dpmt.registry": 1, "dpmt.tasks": 1,
    "dpmt.runtime": 0,
    "dpmt.data": 2, "dpmt.weighting": 3, "dpmt.privacy": 3, "dpmt.audit": 3,
    "dpmt.online": 3, "dpmt.weightings": 3, "dpmt.solvers": 4, "dpmt.metrics": 5,
    "dpmt.model": 5, "dpmt.model_files": 5, "dpmt.ranking": 5, "dpmt.implicit_api": 5,
    "dpmt.item_ids": 5, "dpmt.labels": 2, "dpmt.baselines": 5,
    "dpmt.scoring": 5, "dpmt.model_report": 5,
    "dpmt.train": 6, "dpmt.apps": 7, "dpmt": 8, "dpmt.__main__": 8,
}


def _layer(mod: str) -> int:
    best = None
    for prefix, lay in LAYER.items():
        if mod == prefix or mod.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, lay)
    assert best is not None, f"{mod} has no layer: add it to LAYER"
    return best[1]


def test_dependencies_go_one_way():
    bad = []
    for m, targets in _graph().items():
        if m == "dpmt":
            continue
        for t in targets:
            if t == "dpmt":
                continue
            if _layer(t) > _layer(m):
                bad.append(f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})")
    assert bad == []


def test_the_package_never_imports_the_experiments():
    for p in PKG.rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in ("experiments", "scripts", "tests", "benchmarks")
                           for n in names), p


def test_the_harness_reaches_the_cli_only_as_an_entry_point(monkeypatch):
    """``dpmt bench`` exists (registered by benchmarks/ under ``dpmt.commands``) although no
    module of the package names ``benchmarks``; a command that fails to load is listed and
    says why when run, instead of breaking every other command."""
    import argparse
    import importlib.metadata as md

    from dpmt.apps import cli
    from dpmt.errors import ConfigError

    sub = next(a for a in cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    assert "bench" in sub.choices and "benchmarks.bench" in sys.modules

    broken = md.EntryPoint(name="broken", value="no_such_module_dpmt:command",
                           group=cli.COMMANDS_GROUP)
    real = md.entry_points
    monkeypatch.setattr(md, "entry_points", lambda group=None:
                        [broken] if group == cli.COMMANDS_GROUP else real(group=group))
    parser = argparse.ArgumentParser()
    cli._add_plugin_commands(parser.add_subparsers())
    args = parser.parse_args(["broken"])
    with pytest.raises(ConfigError, match="could not be loaded.*no_such_module_dpmt"):
        args.func(args)


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_600_lines(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)} has {n} lines: split it by concern"


def test_docstrings_cite_only_files_in_this_repository():
    for p in [*PKG.rglob("*.py"), *(ROOT / "experiments").rglob("*.py"),
              *(ROOT / "benchmarks").rglob("*.py")]:
        text = p.read_text(encoding="utf-8")
        for needle in ("shared/", "../shared", "dpam_protocol", "jdp_notes"):
            assert needle not in text, f"{p.relative_to(ROOT)} cites {needle!r}"


def test_importing_dpmt_changes_nothing_in_the_process():
    """Importing every module leaves the LAPACK thread count (and the environment) alone;
    thread limits are set by an explicit call (fit, the applications)."""
    code = r"""
import ctypes, os, importlib, pkgutil, sys
import scipy.linalg.cython_lapack
paths = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'scipy_openblas' in l
                and l.split()[-1].endswith('.so') and '64_' not in os.path.basename(l.split()[-1])})
get = [getattr(ctypes.CDLL(p), 'scipy_openblas_get_num_threads', None) for p in paths]
get = [g for g in get if g is not None]
before = [g() for g in get]
import jax, numpy  # their own import-time settings are not ours
env = dict(os.environ)
import dpmt
for m in pkgutil.walk_packages(dpmt.__path__, 'dpmt.'):
    if m.name.endswith('__main__'):
        continue
    importlib.import_module(m.name)
after = [g() for g in get]
assert before == after, (before, after)
assert dict(os.environ) == env
import dpmt.runtime
if get:
    dpmt.runtime.limit_lapack_threads(1)
    assert [g() for g in get] == [1] * len(get)
    # a scope sets its count inside (EASE's inverse runs in one) and restores the run's after
    with dpmt.runtime.lapack_threads(3) as n:
        assert n == 3 and [g() for g in get] == [3] * len(get)
    assert [g() for g in get] == [1] * len(get)
    try:
        with dpmt.runtime.lapack_threads(2):
            raise KeyError
    except KeyError:
        pass
    assert [g() for g in get] == [1] * len(get)     # restored on an exception too
print('ok', before, after)
"""
    env = {"OPENBLAS_NUM_THREADS": "", "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok")


def test_compiled_code_is_released_when_the_process_nears_the_mapping_limit():
    """quality / tune / compare fit hundreds of models in one process; every XLA:CPU
    executable holds memory mappings, and at vm.max_map_count LLVM fails."""
    import jax
    import jax.numpy as jnp

    from dpmt import runtime

    m = runtime.memory_maps()
    if m is None:
        pytest.skip("no /proc here")
    before = m[0]
    for i in range(40):
        jax.jit(lambda x, i=i: jnp.sin(x) * i)(jnp.ones(i + 2)).block_until_ready()
    grown = runtime.memory_maps()[0]
    assert grown > before                                   # compiled code holds mappings
    assert not runtime.release_compiled_code(share=1.0)     # below the limit: nothing done
    assert runtime.release_compiled_code(share=0.0)         # cleared...
    assert runtime.memory_maps()[0] < grown                 # ...and the mappings came back


def _function_level_imports():
    """(path, line, module) of every import inside a function of the package."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import):
                        out += [(path, node.lineno, a.name) for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and not node.level:
                        out.append((path, node.lineno, node.module or ""))
    return out


def test_no_standard_library_import_hides_inside_a_function():
    """Imports live at module level (issue 27); one inside a function must be there for a
    reason — a heavy or optional dependency, or the CLI's fast start — which never holds for
    the standard library."""
    std = set(sys.stdlib_module_names)
    hidden = [f"{p.relative_to(ROOT)}:{line} {mod}" for p, line, mod in _function_level_imports()
              if mod.split(".")[0] in std]
    assert hidden == []


def test_the_command_line_starts_without_jax_scipy_or_matplotlib():
    """Why the CLI's commands import the library inside their functions: ``dpmt --help`` and
    argument errors must not wait for jax (seconds), scipy or matplotlib."""
    code = ("import sys, dpmt.apps.cli; "
            "print(sorted(m for m in ('jax', 'scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.stdout.strip() == "[]"
