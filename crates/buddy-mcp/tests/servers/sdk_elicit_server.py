# A Python MCP SDK (2.x) server for buddy's tests: `book` asks with `await ctx.elicit()`
# (the style of most examples), `book_resolved` with the SDK's resolver style
# (`Resolve` + `Elicit`). Both answer with what came back.
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve


class Guest(BaseModel):
    name: str


mcp = MCPServer("sdk-elicit")


def said(outcome) -> str:
    if outcome.action == "accept":
        return f"accept {outcome.data.name}"
    return outcome.action


@mcp.tool()
async def book(table: str, ctx: Context) -> str:
    """Books a table, asking who for."""
    outcome = await ctx.elicit(f"Who is table {table} for?", Guest)
    return f"book {table}: {said(outcome)}"


def ask_guest(table: str):
    return Elicit(f"Who is table {table} for (resolver)?", Guest)


@mcp.tool()
async def book_resolved(
    table: str, guest: Annotated[ElicitationResult[Guest], Resolve(ask_guest)]
) -> str:
    """Books a table, the guest filled in by a resolver."""
    return f"book_resolved {table}: {said(guest)}"


if __name__ == "__main__":
    mcp.run()
