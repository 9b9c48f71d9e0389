"""envs/blackjack_env's own rules and models, served by upstream openenv-core 0.3.0's create_app.

Run only with the upstream virtual environment's Python. The env's files import `Action`,
`Observation`, `State` and `Environment` from `openenv`; here that name is upstream's package, so
those four upstream classes are put on it first, and the very same env code then runs on
upstream's server. Same game logic on both sides: the benchmark compares the stacks, not envs.
"""

import sys
from pathlib import Path

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

import openenv

openenv.Action, openenv.Observation, openenv.State, openenv.Environment = Action, Observation, State, Environment
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "blackjack_env"))

from models import BlackjackAction, BlackjackObservation  # noqa: E402
from server.blackjack_environment import BlackjackEnvironment  # noqa: E402


class UpstreamBlackjack(BlackjackEnvironment):
    def __init__(self):
        Environment.__init__(self)  # upstream's server reads .transform and .rubric
        BlackjackEnvironment.__init__(self)


app = create_app(
    UpstreamBlackjack, BlackjackAction, BlackjackObservation, env_name="blackjack_env", max_concurrent_envs=256
)
