"""What of a user's script another process runs to rebuild the pieces defined in it: its
definitions, never what it does.

Pieces defined in the script that runs (`python my_bench.py`) are found by another process (a rank
of `train(nproc=2)`, a study's command, a server) in that script's file. Running the whole file
there would do everything the script does at its top level once more per process: an
`if os.path.exists(OUT): shutil.rmtree(OUT)` at its top would remove the run the script just
started, a bench would bench again. Such a process runs only the statements that define names
without acting (`definition_statement`):

- `import` and `from ... import`;
- `def` and `class` statements (with their decorators and default values);
- a name set to a plain value, an expression that calls nothing (`HIDDEN = 64`, `SIZES = (32, 64)`);
- an `if` or `try` made of these alone (`if TYPE_CHECKING:`, `try: import x` / `except ImportError:`).

Everything else is left out: calls, loops, `with` blocks, the whole `if __name__ == "__main__":`
block. A name they set is unavailable there (and so is one of the script's own objects whose
attribute or item they set: `Config.width = 8`), and so is every definition that reads one (a
function that uses a value a call computed), so the process that makes the workload can say,
before it starts any other, which piece would not be there and why
(`ScriptDefinitions.why_unavailable`). A module's attribute set at the top level
(`torch.backends.cudnn.benchmark = True`) is the module's, not the pieces': it is left out
without a word.
"""

from __future__ import annotations

import __future__
import ast
import dis
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

LEFT_OUT = ("a statement other processes do not run (they run only a script's imports, defs, classes and names "
            "set to values that call nothing)")
"""What they run of a script, in the words of an error line."""
QUOTED_CHARS = 60
"""The most characters of a statement an error line quotes."""
READS = frozenset({"LOAD_NAME", "LOAD_GLOBAL", "LOAD_FROM_DICT_OR_GLOBALS"})
"""The instructions that read a module's name (a statement at the top level or a class body; a function)."""
BINDS_AT_TOP = frozenset({"STORE_NAME", "DELETE_NAME"})
BINDS_ANYWHERE = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


@dataclass(frozen=True)
class Unavailable:
    """A name the definitions do not set: the statement the script sets it with, and, where that
    statement is a definition left out because it reads another unavailable name, that name."""

    line: int
    code: str
    needs: str | None = None


@dataclass(frozen=True)
class Statement:
    """One statement of the script's top level, with the module names it reads and sets."""

    node: ast.stmt
    reads: frozenset[str]
    binds: frozenset[str]


@dataclass(frozen=True)
class ScriptDefinitions:
    """The definitions of one script (`script_definitions`), and what they leave unset."""

    path: Path
    kept: tuple[ast.stmt, ...]
    defined: frozenset[str]
    unavailable: dict[str, Unavailable]

    def code(self) -> CodeType:
        """The definitions compiled as the script's own file, so tracebacks and
        `inspect.getsource` point into it."""
        return compile(ast.Module(body=list(self.kept), type_ignores=[]), str(self.path), "exec", dont_inherit=True)

    def why_unavailable(self, name: str) -> str | None:
        """None where the definitions set the top-level `name`; else why not, as the end of an
        error line that begins with the piece."""
        if name in self.unavailable:
            chain = [name]
            reason = self.unavailable[name]
            while reason.needs is not None and reason.needs not in chain:
                chain.append(reason.needs)
                reason = self.unavailable[reason.needs]
            where = f"line {reason.line} of {self.path.name} (`{reason.code}`), {LEFT_OUT}"
            if len(chain) == 1:
                return f"is set by {where}: define it at the top level, or import it from a module"
            through = f" (through {', '.join(chain[1:-1])})" if len(chain) > 2 else ""
            return (f"needs {chain[-1]}{through}, set by {where}: set it inside the function that uses it, or "
                    "import the pieces from a module")
        if name not in self.defined:
            return f"is not defined at the top level of {self.path.name}"
        return None


def script_definitions(path: str | Path) -> ScriptDefinitions:
    """The definitions of the script at `path`; OSError or SyntaxError where it cannot be read."""
    path = Path(path)
    text = importlib.util.decode_source(path.read_bytes())
    tree = ast.parse(text, filename=str(path))
    flags = _future_flags(tree)
    statements = [_statement(node, path, flags) for node in tree.body]
    imported = {name for statement in statements for name in _imported(statement.node)}
    unavailable: dict[str, Unavailable] = {}
    kept: list[Statement] = []
    for statement in statements:
        if definition_statement(statement.node):
            kept.append(statement)
            continue
        for name in sorted(statement.binds | (_changed(statement.node) - imported)):
            unavailable.setdefault(name, Unavailable(statement.node.lineno, _quoted(text, statement.node)))
    left_out = True
    while left_out:  # a definition that reads an unavailable name is unavailable too, and so on
        left_out = False
        for statement in list(kept):
            missing = sorted(statement.reads & unavailable.keys())
            if missing:
                kept.remove(statement)
                left_out = True
                for name in sorted(statement.binds):
                    unavailable.setdefault(name, Unavailable(statement.node.lineno, _quoted(text, statement.node),
                                                             missing[0]))
    defined = frozenset(name for statement in kept for name in statement.binds) - unavailable.keys()
    return ScriptDefinitions(path, tuple(statement.node for statement in kept), defined, unavailable)


def definition_statement(node: ast.stmt) -> bool:
    """Whether a top-level statement only defines names (see the module's docstring)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(node, ast.Expr):  # a docstring; any other expression statement acts
        return isinstance(node.value, ast.Constant)
    if isinstance(node, ast.Assign):
        return all(_names_only(target) for target in node.targets) and _plain(node.value)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Name) and (node.value is None or _plain(node.value))
    if isinstance(node, ast.If):
        return (not _main_guard(node.test) and _plain(node.test)
                and all(definition_statement(child) for child in (*node.body, *node.orelse)))
    if isinstance(node, ast.Try):
        handlers = [handler for handler in node.handlers if isinstance(handler, ast.ExceptHandler)]
        return (all(handler.type is None or _plain(handler.type) for handler in handlers)
                and all(definition_statement(child) for child in
                        (*node.body, *(c for h in handlers for c in h.body), *node.orelse, *node.finalbody)))
    return False


def _names_only(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, ast.Starred):
        return _names_only(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_names_only(item) for item in target.elts)
    return False  # an attribute or an item: it changes an object someone else holds


def _plain(node: ast.AST) -> bool:
    """An expression that calls nothing (a lambda's body is not run by defining it)."""
    if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
        return False
    if isinstance(node, ast.Lambda):
        return all(_plain(default) for default in (*node.args.defaults, *node.args.kw_defaults) if default is not None)
    return all(_plain(child) for child in ast.iter_child_nodes(node))


def _imported(node: ast.stmt) -> set[str]:
    """The names an import binds, anywhere in the statement."""
    return {(alias.asname or alias.name).split(".")[0] for child in ast.walk(node)
            if isinstance(child, (ast.Import, ast.ImportFrom)) for alias in child.names}


def _changed(node: ast.stmt) -> set[str]:
    """The names whose attribute or item the statement sets or deletes (`Config.width = 8`)."""
    names = set()
    for child in ast.walk(node):
        targets = (child.targets if isinstance(child, (ast.Assign, ast.Delete))
                   else [child.target] if isinstance(child, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, (ast.Attribute, ast.Subscript)):
                    root = part.value
                    while isinstance(root, (ast.Attribute, ast.Subscript)):
                        root = root.value
                    if isinstance(root, ast.Name):
                        names.add(root.id)
    return names


def _main_guard(test: ast.expr) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides)
            and any(isinstance(side, ast.Constant) and side.value == "__main__" for side in sides))


def _future_flags(tree: ast.Module) -> int:
    """The compiler flags of the script's `from __future__ import ...` (annotations left unevaluated
    read no names)."""
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def _statement(node: ast.stmt, path: Path, flags: int) -> Statement:
    """The names a statement reads and sets, from its bytecode: exactly what Python looks up in
    and stores to the module, in the statement and in every function and class it defines."""
    code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec", flags=flags, dont_inherit=True)
    reads: set[str] = set()
    binds: set[str] = set()
    _scan(code, reads, binds, top=True)
    return Statement(node, frozenset(reads), frozenset(binds))


def _scan(code: CodeType, reads: set[str], binds: set[str], top: bool) -> None:
    for instruction in dis.get_instructions(code):
        if instruction.opname in READS:
            reads.add(instruction.argval)
        elif instruction.opname in BINDS_ANYWHERE or (top and instruction.opname in BINDS_AT_TOP):
            binds.add(instruction.argval)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            _scan(constant, reads, binds, top=False)


def _quoted(text: str, node: ast.stmt) -> str:
    """The statement's first line, shortened to fit in an error line."""
    segment = ast.get_source_segment(text, node) or ""
    first = segment.splitlines()[0].strip() if segment.strip() else type(node).__name__
    return first if len(first) <= QUOTED_CHARS else first[:QUOTED_CHARS - 3] + "..."
