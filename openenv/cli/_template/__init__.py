"""__ENV_NAME__: guess a secret number from 1 to 100 (an OpenEnv environment)."""

from .client import __ENV_CLASS__Env
from .models import __ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State

__all__ = ["__ENV_CLASS__Action", "__ENV_CLASS__Env", "__ENV_CLASS__Observation", "__ENV_CLASS__State"]
