"""The tools as agents see them: each tool's arguments (the bound collection left out, ``FILTERABLE_FIELDS`` as
arguments, ``query_filter`` where offered), unknown arguments refused, and argument errors written for an agent
(the argument, what is wrong, the value's type) instead of pydantic's text with its links."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field, ValidationError

from ...errors import SbertQdrantError, StoreInUseError
from .access import check_may_write
from .filterable import FilterableField

Tool = Callable[..., Awaitable[CallToolResult]]

#: The hidden argument through which a tool gets the values of its filterable-field arguments.
FIELD_VALUES = "field_values"


class Server(MCPServer[Any]):
    """``MCPServer`` that refuses arguments a tool does not take and explains invalid ones in plain words."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arguments: dict[str, list[str]] = {}

    def add_agent_tool(self, fn: Tool, **options: Any) -> None:
        self.add_tool(fn, **options)
        self._arguments[options["name"]] = list(inspect.signature(fn).parameters)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = self._arguments.get(name)
        unknown = sorted(set(arguments) - set(known or ()))
        if known is not None and unknown:
            raise ToolError(
                f"{name} takes no argument {', '.join(map(repr, unknown))}; its arguments are {', '.join(known)}."
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"{name}: {_plain(exc.__cause__)}") from exc.__cause__


def _plain(error: ValidationError) -> str:
    """A validation error in a line: each argument, what is wrong and the type of what was given."""
    parts = []
    for problem in error.errors(include_url=False)[:3]:
        where = ".".join(str(p) for p in problem["loc"]) or "arguments"
        given = problem.get("input")
        shown = "" if problem["type"] == "missing" else f" (got {type(given).__name__} {str(given)[:40]!r})"
        parts.append(f"{where}: {problem['msg']}{shown}")
    return "; ".join(parts) + "."


def agent_tool(
    tool: Tool,
    *,
    name: str,
    writes: bool,
    bound: str | None,
    fields: dict[str, FilterableField],
    query_filter: bool,
    held: Callable[[], str],
    redact: Callable[[str], str],
) -> Tool:
    """The tool as the protocol shows it: ``collection_name`` fixed to ``bound`` (when given), ``query_filter``
    left out unless offered, one argument per filterable field (for tools that filter), and the failures an agent
    can act on raised as tool errors (the SDK hides other exceptions' text), the data folder named by its setting;
    ``writes``: refused to a client with the read-only token."""
    signature = inspect.signature(tool, eval_str=True)
    takes_fields = FIELD_VALUES in signature.parameters
    drop = {FIELD_VALUES} | ({"collection_name"} if bound is not None else set())
    if not query_filter:
        drop.add("query_filter")
    parameters = [p for p in signature.parameters.values() if p.name not in drop]
    if takes_fields:
        parameters += _field_parameters(fields, {p.name for p in parameters})
    names = set(fields) if takes_fields else set()

    @functools.wraps(tool)
    async def run(**kwargs: Any) -> CallToolResult:
        if writes:
            check_may_write(name)
        values = {name: kwargs.pop(name) for name in names if name in kwargs}
        fixed: dict[str, Any] = {} if bound is None else {"collection_name": bound}
        if takes_fields:
            fixed[FIELD_VALUES] = values
        try:
            return await tool(**kwargs, **fixed)
        except StoreInUseError as exc:
            raise ToolError(held()) from exc
        except (SbertQdrantError, OSError) as exc:
            raise ToolError(redact(str(exc))) from exc

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return run


def _field_parameters(fields: dict[str, FilterableField], taken: set[str]) -> list[inspect.Parameter]:
    """One keyword argument per field: required ones first, as mcp-server-qdrant orders them."""
    clashing = sorted(taken.intersection(fields))
    if clashing:
        raise SbertQdrantError(
            f"FILTERABLE_FIELDS names {clashing}, which qdrant-find already takes as arguments; rename those fields."
        )
    ordered = sorted(fields.values(), key=lambda f: not f.required)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[f.python_type, Field(description=f.description)]
            if f.required
            else Annotated[f.python_type | None, Field(description=f.description)],
            **({} if f.required else {"default": None}),
        )
        for f in ordered
    ]
