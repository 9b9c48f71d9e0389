"""An environment written against upstream openenv 0.10.0's API, with its Task API: for our
client to drive (run with the 0.10.0 venv: `uvicorn tasks_server_010:app`)."""

from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app

PUZZLES = {
    "train": [{"id": f"train-{i}", "target": i * 3} for i in range(6)],
    "test": [{"id": "test-0", "target": 100}],
}


class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    target_known: bool = False
    feedback: str = ""


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="start", step_count=0)
        self._target = 7

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessObservation:
        self._state = State(episode_id=episode_id or "ep", step_count=0)
        split, index = kwargs.get("split"), kwargs.get("index")
        self._target = PUZZLES[split][index]["target"] if split is not None else 7
        return GuessObservation(
            target_known=split is not None, feedback="guess", metadata={"split": split, "index": index}
        )

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        hit = action.guess == self._target
        return GuessObservation(
            feedback="yes" if hit else ("higher" if action.guess < self._target else "lower"),
            reward=1.0 if hit else 0.0,
            done=hit,
            metadata={"guesses": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state

    def list_splits(self) -> list:
        return list(PUZZLES)

    def list_tasks(self, split: str) -> list:
        return PUZZLES[split]

    def num_tasks(self, split: str) -> int:
        return len(PUZZLES[split])

    def get_task(self, split: str, index: int) -> Any:
        return PUZZLES[split][index]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list:
        return PUZZLES[split][start:stop]


app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess_env", max_concurrent_envs=4)
