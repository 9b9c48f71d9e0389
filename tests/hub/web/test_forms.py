"""The play panel's action form and its JSON view show the same action: `collect` reads the form,
`form_values` fills it back; what the form cannot show is refused with the field named, never
dropped. Fast: no server, no browser (the browser journey is in test_browser.py)."""

from __future__ import annotations

import pytest

from hub_service.ui.forms import FormError, collect, field_specs, form_values

SCHEMA = {
    "type": "object",
    "properties": {
        "move": {"type": "string", "enum": ["hit", "stand"]},
        "bet": {"type": "integer", "minimum": 1},
        "loud": {"type": "boolean"},
        "note": {"type": "string"},
        "extra": {"type": "object"},
        "kind": {"const": "play"},
    },
    "required": ["move", "bet"],
}


def test_json_fills_the_form_and_the_form_gives_the_same_json_back() -> None:
    specs = field_specs(SCHEMA)
    start = [s.initial() for s in specs]
    action = {"move": "stand", "bet": 5, "loud": True, "note": "hi", "extra": {"a": [1, 2]}, "kind": "play"}
    values = form_values(specs, action, start)
    assert collect(specs, values) == action
    # a field the JSON leaves out keeps what the form had
    kept = form_values(specs, {"bet": 7}, values)
    assert collect(specs, kept) == {**action, "bet": 7}


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ({"move": "fold"}, 'move: "fold" is not one of the choices'),
        ({"bet": "five"}, 'bet: "five" is not a number'),
        ({"bet": True}, "bet: true is not a number"),
        ({"loud": "yes"}, 'loud: "yes" is not true or false'),
        ({"note": 3}, "note: 3 is not text"),
        ({"kind": "other"}, 'kind: it can only be "play"'),
        ({"typo": 1, "bet": 2}, "the form has no field for typo"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_what_the_form_cannot_show_is_refused_by_name(action: object, says: str) -> None:
    specs = field_specs(SCHEMA)
    with pytest.raises(FormError, match=says.replace("(", r"\(")):
        form_values(specs, action, [s.initial() for s in specs])
