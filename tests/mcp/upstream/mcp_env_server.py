"""An MCP environment built with upstream openenv-core 0.3.0 and FastMCP, served by upstream's
create_app. Run by upstream's Python only: `python -m uvicorn mcp_env_server:app` in this folder."""

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State


class UpstreamToolEnv(MCPEnvironment):
    def __init__(self):
        mcp = FastMCP("upstream_tools")

        @mcp.tool
        def add(a: int, b: int = 2) -> int:
            """Add two integers.

            Args:
                a: The first addend.
                b: The second addend.
            """
            return a + b

        @mcp.tool
        def describe(name: str) -> dict:
            """Describe a name."""
            return {"name": name, "length": len(name)}

        @mcp.tool
        def boom(reason: str) -> str:
            """Always fails."""
            raise ValueError(reason)

        super().__init__(mcp)
        self._state = State(episode_id="upstream", step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        return Observation(done=False, reward=0.0)

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(done=False, reward=0.0)

    @property
    def state(self):
        return self._state


app = create_app(UpstreamToolEnv, CallToolAction, CallToolObservation, env_name="upstream_tools")
