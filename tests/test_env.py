"""MiniGUIEnv: observation contract, invalid actions (table-driven), navigation, rendering."""

from __future__ import annotations

import io
import random
from collections.abc import Callable

import pytest

from guirl.actions import Action, ActionType
from guirl.env import MiniGUIEnv, PhoneState, generate_tasks, random_world, render_with_boxes
from guirl.env import apps as A
from guirl.env.expert import solve


def _world() -> PhoneState:
    st = random_world(random.Random(7))
    assert len(st.contacts) > A.PAGE  # the contacts list scrolls in this world
    return st


def _env(render: bool = False) -> MiniGUIEnv:
    env = MiniGUIEnv(render=render)
    env.reset(options={"state": _world()})
    return env


def _center(env: MiniGUIEnv, eid: str) -> tuple[float, float]:
    w = env.screen().find(eid)
    assert w is not None, f"{eid} not on screen {env.state.ui.app}/{env.state.ui.screen}"
    return ((w.box[0] + w.box[2]) / 2, (w.box[1] + w.box[3]) / 2)


def _tap(env: MiniGUIEnv, eid: str) -> dict:
    return env.step(Action(ActionType.CLICK, point=_center(env, eid)))[4]


def _home(env: MiniGUIEnv) -> None:
    """Setup for cases that start where reset() leaves the phone: the home screen."""


def _contacts(env: MiniGUIEnv) -> None:
    _tap(env, "launcher.icon.contacts")


def _settings(env: MiniGUIEnv) -> None:
    _tap(env, "launcher.icon.settings")


def _calendar_loading(env: MiniGUIEnv) -> None:
    _tap(env, "launcher.icon.calendar")
    assert env.state.ui.loading


def _contact_detail(env: MiniGUIEnv) -> None:
    _tap(env, "launcher.icon.contacts")
    first = env.state.sorted_contacts()[0]
    _tap(env, f"contacts.item.{first.cid}")


def _new_contact_form(env: MiniGUIEnv) -> None:
    _tap(env, "launcher.icon.contacts")
    _tap(env, "contacts.new")


def _ended(env: MiniGUIEnv) -> None:
    env.step(Action(ActionType.TERMINATE, status="fail"))


def _act(t: str, **kw) -> Action:
    return Action(ActionType(t), **kw)


# (setup, action, substring of info["invalid"]) -- the state must not change in any of them
INVALID_CASES: list[tuple[str, Callable[[MiniGUIEnv], None], object, str]] = [
    # tap on empty wallpaper of the launcher
    ("click_empty_space", _home, _act("click", point=(0.5, 0.7)), "no element"),
    # typing with no focused text field
    ("type_no_focus", _home, _act("type", text="hello"), "no focused text field"),
    # the settings screen does not scroll
    ("scroll_not_scrollable", _settings, _act("scroll", direction="up", convention="finger"), "not scrollable"),
    # horizontal swipe on a vertical list
    ("scroll_sideways", _contacts, _act("scroll", direction="left", convention="finger"), "vertically"),
    # content-convention "up" == finger down: already at the top
    ("scroll_past_top", _contacts, _act("scroll", direction="up", convention="content"), "already at the top"),
    # web-only action types
    ("select_unsupported", _home, _act("select", point=(0.2, 0.2), text="x"), "not supported"),
    ("hover_unsupported", _home, _act("hover", point=(0.2, 0.2)), "not supported"),
    # an app that is not installed
    ("open_unknown_app", _home, _act("open_app", text="Banana"), "unknown app"),
    # enter key with no keyboard up
    ("enter_no_focus", _home, _act("press", key="enter"), "enter pressed"),
    # long press on a plain button
    ("long_press_button", _contacts, "long_press:contacts.new", "no long-press"),
    # tapping while the calendar is still loading
    ("tap_while_loading", _calendar_loading, _act("click", point=(0.5, 0.45)), "loading"),
    # back on the home screen
    ("back_on_home", _home, _act("press", key="back"), "already on the home screen"),
    # static text is not clickable
    ("click_static_text", _contact_detail, "click:contacts.detail.phone", "not clickable"),
    # saving an empty contact form
    ("save_empty_form", _new_contact_form, "click:form.save", "Name is required"),
    # a dict that is not an action
    ("malformed_dict", _home, {"type": "click"}, "malformed action"),
    # not an action at all
    ("not_an_action", _home, None, "not an Action"),
    # anything after terminate
    ("after_terminate", _ended, _act("wait"), "episode already ended"),
]


@pytest.mark.parametrize("name,setup,action,reason", INVALID_CASES, ids=[c[0] for c in INVALID_CASES])
def test_invalid_actions_never_crash_and_change_nothing(name, setup, action, reason):
    env = _env()
    setup(env)
    if isinstance(action, str):  # "kind:element_id" resolved on the current screen
        kind, eid = action.split(":")
        action = Action(ActionType(kind), point=_center(env, eid))
    before = env.state.to_dict()
    obs, reward, term, trunc, info = env.step(action)
    assert info["invalid"] is not None and reason in info["invalid"], info
    assert info["effect"] == "no_change"
    assert env.state.to_dict() == before
    assert reward == 0.0 and obs["elements"]


def test_observation_contract():
    env = MiniGUIEnv(width=280, height=504)
    obs, info = env.reset(seed=3)
    assert obs["screenshot"].size == (280, 504)
    assert obs["app"] == "launcher" and obs["screen"] == "home"
    for e in obs["elements"]:
        assert e.label and all(0.0 <= v <= 1.0 for v in e.box) and e.box[0] <= e.box[2] and e.box[1] <= e.box[3]
    assert {"success", "task_id"} <= set(info)


def test_reset_seed_is_deterministic():
    a = MiniGUIEnv(render=False)
    b = MiniGUIEnv(render=False)
    a.reset(seed=11)
    b.reset(seed=11)
    assert a.state.to_dict() == b.state.to_dict()
    b.reset(seed=12)
    assert a.state.to_dict() != b.state.to_dict()


@pytest.mark.parametrize(
    "direction,convention,moves",
    [
        ("up", "finger", True),  # finger up reveals later items
        ("down", "content", True),  # the same scroll in AndroidControl's convention
        ("down", "finger", False),  # finger down at the top: nothing to show
        ("up", "content", False),  # same, content convention
    ],
)
def test_scroll_conventions(direction, convention, moves):
    env = _env()
    _contacts(env)
    hidden = env.state.sorted_contacts()[A.PAGE]
    assert env.screen().find(f"contacts.item.{hidden.cid}") is None  # later items need a scroll
    env.step(Action(ActionType.SCROLL, direction=direction, convention=convention))
    assert (env.screen().find(f"contacts.item.{hidden.cid}") is not None) == moves


def test_fields_need_focus_and_type_replaces():
    env = _env()
    _new_contact_form(env)
    assert env.step(_act("type", text="Zed"))[4]["invalid"]
    _tap(env, "form.name")
    env.step(_act("type", text="Zed"))
    env.step(_act("type", text="Zoe Q"))  # replaces, like select-all + type
    assert env.state.ui.form["name"] == "Zoe Q"
    _tap(env, "form.phone")
    env.step(_act("type", text="555-0000"))
    _tap(env, "form.save")
    c = env.state.contact_by_name("Zoe Q")
    assert c is not None and c.phone == "555-0000" and env.state.ui.screen == "list"


def test_long_press_menu_favorite_and_delete():
    env = _env()
    _contacts(env)
    c = next(x for x in env.state.sorted_contacts()[: A.PAGE] if not x.favorite)
    env.step(Action(ActionType.LONG_PRESS, point=_center(env, f"contacts.item.{c.cid}")))
    assert env.state.ui.dialog == {"kind": "menu", "cid": c.cid}
    ids = {e.element_id for e in env.elements()}
    assert f"contacts.item.{c.cid}" not in ids and "menu.delete" in ids  # list hidden under the dialog
    _tap(env, "menu.favorite")
    assert env.state.contact_by_id(c.cid).favorite and env.state.ui.dialog is None
    n = len(env.state.contacts)
    env.step(Action(ActionType.LONG_PRESS, point=_center(env, f"contacts.item.{c.cid}")))
    _tap(env, "menu.delete")
    assert env.state.contact_by_id(c.cid) is None and len(env.state.contacts) == n - 1


def test_dialog_tap_outside_dismisses_and_airplane_needs_confirm():
    st = _world()
    st.settings["airplane"] = False
    env = MiniGUIEnv(render=False)
    env.reset(options={"state": st})
    _settings(env)
    _tap(env, "settings.airplane")
    assert env.state.ui.dialog is not None and not env.state.settings["airplane"]
    env.step(_act("click", point=(0.5, 0.2)))  # outside the dialog card
    assert env.state.ui.dialog is None and not env.state.settings["airplane"]
    _tap(env, "settings.airplane")
    _tap(env, "dialog.ok")
    assert env.state.settings["airplane"]


def test_wait_ends_loading_and_recents_lists_opened_apps():
    env = _env()
    _calendar_loading(env)
    env.step(_act("wait"))
    assert not env.state.ui.loading and any(e.role == "list_item" for e in env.elements())
    env.step(_act("open_app", text="Contacts"))
    env.step(_act("press", key="recent"))
    cards = [e.label for e in env.elements() if e.role == "card"]
    assert cards[:2] == ["Contacts", "Calendar"]
    _tap(env, "recents.card.calendar")
    assert env.state.ui.app == "calendar"


def test_back_and_home_navigation():
    env = _env()
    _contact_detail(env)
    env.step(_act("press", key="back"))
    assert (env.state.ui.app, env.state.ui.screen) == ("contacts", "list")
    env.step(_act("press", key="back"))
    assert env.state.ui.app == "launcher"
    _contact_detail(env)
    env.step(_act("press", key="home"))
    assert env.state.ui.app == "launcher" and not env.state.ui.stack


def test_success_comes_from_state_not_actions():
    task = next(t for t in generate_tasks(12, 2) if t.category == "item_creation")
    env = MiniGUIEnv(render=False)
    env.reset(options={"task": task})
    _, reward, term, _, info = env.step(_act("terminate", status="success"))  # claims success, did nothing
    assert term and reward == 0.0 and not info["success"]
    traj = solve(task, env=env)
    assert traj.success and traj.reward == 1.0
    assert task.check(env.state_snapshot())


def test_state_snapshot_is_a_copy():
    env = _env()
    snap = env.state_snapshot()
    snap.contacts.clear()
    assert env.state.contacts


def test_truncation_at_max_steps():
    env = MiniGUIEnv(render=False, max_steps=3)
    env.reset(seed=0)
    outs = [env.step(_act("wait")) for _ in range(3)]
    assert [o[3] for o in outs] == [False, False, True]
    assert env.step(_act("wait"))[4]["invalid"] == "episode already ended; call reset()"


@pytest.mark.parametrize("size", [(280, 504), (1080, 2400), (560, 1008)])
def test_render_any_resolution_is_deterministic(size):
    w, h = size
    envs = [MiniGUIEnv(width=w, height=h) for _ in range(2)]
    shots = []
    for env in envs:
        env.reset(options={"state": _world()})
        _contacts(env)
        buf = io.BytesIO()
        env.render().save(buf, format="PNG")
        shots.append(buf.getvalue())
    assert shots[0] == shots[1]
    assert envs[0].render().size == (w, h)


def test_render_with_boxes_draws_inside_the_box():
    env = _env(render=True)
    img = env.render()
    box = env.screen().find("launcher.icon.contacts").box
    out = render_with_boxes(img, [box], ["Contacts"], points=[(0.2, 0.2)])
    assert out.size == img.size and out.tobytes() != img.tobytes()
    assert out.getpixel((round(box[0] * img.width), round((box[1] + box[3]) / 2 * img.height))) == (255, 0, 180)
