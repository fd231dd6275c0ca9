"""MiniGUIEnv: a deterministic simulated phone with a gymnasium-style API.

``reset(seed=None, options={"task": task}) -> (obs, info)`` and
``step(action) -> (obs, reward, terminated, truncated, info)`` where ``action`` is a canonical
:class:`guirl.actions.Action` (normalised points; scroll in either convention, converted to
the finger convention internally) and::

    obs = {"screenshot": PIL.Image | None,   # None when render=False
           "elements": list[UIElement],      # accessibility tree, normalised boxes
           "app": str, "screen": str}

Every step's ``info`` has ``"effect"`` (``"changed"`` / ``"no_change"``), ``"invalid"`` (a reason
string when the action had no effect because it could not apply, else ``None``),
``"success"`` (the task predicate on the current state) and ``"step"``. Invalid actions never
raise and leave the state exactly as it was. ``terminate`` ends the episode with reward 1.0
when ``task.check(state)`` holds (success is computed from the app state, not from the
actions), else 0.0; every other step has reward 0.0. ``answer`` stores its text in
``state.answer`` (what information-query tasks check).

Text entry: ``type`` replaces the focused field's content (like select-all then type);
``press enter`` closes the keyboard.
"""

from __future__ import annotations

import random
from typing import Any

from PIL import Image

import guirl.env.apps as A
from guirl.actions import Action, ActionError, ActionType
from guirl.data.schema import UIElement
from guirl.env.render import render_screen
from guirl.env.state import PhoneState

Obs = dict[str, Any]


class MiniGUIEnv:
    """Simulated phone. ``width``/``height`` in pixels (multiples of 28 keep Qwen2.5-VL patches whole)."""

    def __init__(self, width: int = 280, height: int = 504, render: bool = True, max_steps: int = 100) -> None:
        if width < 28 or height < 28:
            raise ValueError(f"MiniGUIEnv size {width}x{height} too small; use at least 28x28 px")
        self.width, self.height, self.render_images, self.max_steps = width, height, render, max_steps
        self.state = PhoneState()
        self.task: Any = None
        self.steps = 0
        self.done = False
        self._screen: A.Screen | None = None

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Obs, dict[str, Any]]:
        """Start an episode on the home screen.

        ``options["task"]``: a :class:`guirl.env.tasks.Task` (its initial state is used);
        ``options["state"]``: a :class:`PhoneState` or its dict; otherwise a random world from ``seed``.
        """
        options = options or {}
        self.task = options.get("task")
        if self.task is not None:
            self.state = PhoneState.from_dict(self.task.initial_state)
        elif options.get("state") is not None:
            s = options["state"]
            self.state = s.copy() if isinstance(s, PhoneState) else PhoneState.from_dict(s)
        else:
            from guirl.env.tasks import random_world

            self.state = random_world(random.Random(seed))
        A.open_app(self.state, "launcher")
        self.steps, self.done = 0, False
        self._screen = None
        return self._obs(), {"success": self._success(), "task_id": getattr(self.task, "task_id", None)}

    def step(self, action: Action | dict[str, Any]) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        """Apply one action; see the module docstring for the contract."""
        info: dict[str, Any] = {"effect": "no_change", "invalid": None}
        if self.done:
            info["invalid"] = "episode already ended; call reset()"
            return self._finish(info, 0.0, True, False)
        self.steps += 1
        if isinstance(action, dict):
            try:
                action = Action.from_dict(action)
            except ActionError as e:
                action = None  # type: ignore[assignment]
                info["invalid"] = f"malformed action: {e}"
        if not isinstance(action, Action):
            info["invalid"] = info["invalid"] or f"not an Action: {type(action).__name__}"
            return self._finish(info, 0.0, False, self.steps >= self.max_steps)
        before = self.state.to_dict()
        reason, terminated = self._apply(action)
        if reason is not None:  # guarantee: an invalid action leaves no trace
            self.state = PhoneState.from_dict(before)
            info["invalid"] = reason
        changed = self.state.to_dict() != before
        if changed:
            self._screen = None
        info["effect"] = "changed" if changed else "no_change"
        reward = 0.0
        if terminated:
            self.done = True
            ok = self._success()
            reward = 1.0 if ok and action.status == "success" else 0.0
            info["status"] = action.status
        return self._finish(info, reward, terminated, (not terminated) and self.steps >= self.max_steps)

    def state_snapshot(self) -> PhoneState:
        """Deep copy of the full state (world + UI) for checks."""
        return self.state.copy()

    def screen(self) -> A.Screen:
        """The current screen model (widgets with handlers), rebuilt when the state changed."""
        if self._screen is None:
            self._screen = A.build_screen(self.state)
        return self._screen

    def render(self) -> Image.Image:
        """Screenshot of the current screen at ``width`` x ``height`` px."""
        return render_screen(self.screen(), self.width, self.height)

    def elements(self) -> list[UIElement]:
        """Accessibility tree of the current screen (normalised boxes, paint order)."""
        return [
            UIElement(
                element_id=w.element_id,
                box=tuple(round(v, 4) for v in w.box),  # type: ignore[arg-type]
                label=w.label,
                role=w.role,
                clickable=w.clickable,
                scrollable=w.scrollable,
                text=w.text,
            )
            for w in self.screen().widgets
        ]

    # ------------------------------------------------------------- internals
    def _success(self) -> bool:
        return bool(self.task is not None and self.task.check(self.state))

    def _obs(self) -> Obs:
        sc = self.screen()
        return {
            "screenshot": render_screen(sc, self.width, self.height) if self.render_images else None,
            "elements": self.elements(),
            "app": sc.app,
            "screen": sc.name,
        }

    def _finish(
        self, info: dict[str, Any], reward: float, term: bool, trunc: bool
    ) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if trunc:
            self.done = True
        info["success"] = self._success()
        info["step"] = self.steps
        return self._obs(), reward, term, trunc, info

    def _apply(self, a: Action) -> tuple[str | None, bool]:
        """Mutate the state for ``a``. Returns (invalid reason or None, terminated)."""
        st = self.state
        t = a.type
        if t is ActionType.TERMINATE:
            return None, True
        if t is ActionType.ANSWER:
            st.answer = a.text
            return None, False
        if t is ActionType.WAIT:
            if st.ui.loading:
                st.ui.loading = False
            return None, False
        if t is ActionType.PRESS:
            if a.key == "back":
                return A.go_back(st), False
            if a.key == "home":
                return A.go_home(st), False
            if a.key == "recent":
                return A.go_recents(st), False
            if st.ui.focus is None:  # enter
                return "enter pressed with no focused text field", False
            st.ui.focus = None
            return None, False
        if t is ActionType.OPEN_APP:
            app = A.resolve_app(a.text or "")
            if app is None:
                return f"unknown app {a.text!r}; installed: {', '.join(A.APP_TITLES[x] for x in A.APPS)}", False
            A.open_app(st, app)
            return None, False
        if t is ActionType.TYPE:
            if st.ui.focus is None:
                return "no focused text field; click a field first", False
            st.ui.form[st.ui.focus] = a.text or ""
            return None, False
        if t is ActionType.SCROLL:
            return self._scroll(a), False
        if t in (ActionType.CLICK, ActionType.LONG_PRESS):
            return self._tap(a), False
        return f"action type {t.value!r} is not supported on a phone", False

    def _scroll(self, a: Action) -> str | None:
        sc = self.screen()
        if sc.scroll_len <= A.PAGE:
            return "screen is not scrollable" if sc.scroll_len == 0 else "list fits on one screen"
        d = a.in_convention("finger").direction
        if d in ("left", "right"):
            return "this list scrolls vertically only"
        ui = self.state.ui
        top = max(0, sc.scroll_len - A.PAGE)
        cur = max(0, min(ui.scroll, top))
        new = min(top, cur + A.SCROLL_STEP) if d == "up" else max(0, cur - A.SCROLL_STEP)
        if new == cur:
            return "already at the end of the list" if d == "up" else "already at the top of the list"
        ui.scroll = new
        return None

    def _tap(self, a: Action) -> str | None:
        assert a.point is not None
        st = self.state
        sc = self.screen()
        w = sc.hit(a.point)
        if st.ui.loading and (w is None or w.role != "nav"):
            return "screen is loading; wait for it"
        if sc.dialog and (w is None or w.role in ("title",)):
            st.ui.dialog = None  # tap outside a dialog dismisses it
            return None
        if w is None:
            return "no element at this point"
        if a.type is ActionType.LONG_PRESS:
            if w.on_long_press is None:
                return f"'{w.label}' has no long-press action"
            return w.on_long_press(st)
        if w.on_click is None:
            return f"'{w.label}' is not clickable"
        return w.on_click(st)
