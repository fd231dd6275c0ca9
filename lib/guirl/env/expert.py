"""Scripted MiniGUI expert: solves every generated task by playing the env through ``step``.

The expert reads the privileged app state to plan, but acts only with canonical actions on
the current screen (tapping the centre of the widget it means, in normalised units), so the
recorded trajectory is a valid demonstration. Each recorded step holds the screenshot (or
``None`` when the env does not render), the accessibility tree, the action, a low-level
instruction ("Tap the Contacts icon"), the target box (the acted-on element) and candidate
boxes (every clickable element containing the tap point), and per-step annotations in the
style of GUI-Odyssey / AITZ: screen description, intention, progress summary.

Navigation style is drawn from a per-task RNG (open an app by its launcher icon, by
``open_app``, or from recent apps; reply from a thread or compose anew; favourite by
long-press menu or from the detail page) so that non-coordinate actions appear in realistic
proportions. The expert never issues an invalid action: it asserts ``info["invalid"] is None``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from guirl.actions import Action, ActionType
from guirl.data.schema import Episode, Step, UIElement
from guirl.env import apps as A
from guirl.env.core import MiniGUIEnv
from guirl.env.state import APP_TITLES, SETTING_LABELS, PhoneState
from guirl.env.tasks import Task

Box = tuple[float, float, float, float]
#: Finger swipe start/end (normalised) for "scroll down to see more" (finger up) and back.
SWIPE_UP = ((0.5, 0.65), (0.5, 0.25))
SWIPE_DOWN = ((0.5, 0.25), (0.5, 0.65))


class ExpertError(RuntimeError):
    """The expert could not solve a task (a bug in the env, the task or the expert)."""


#: How many of the latest low-level instructions a progress summary names.
PROGRESS_PREVIOUS = 2


def progress_text(done: int, total: int, previous: Sequence[str]) -> str:
    """A step's ``progress_summary`` (the task state before it, GUI-Odyssey's ``context``): the
    subgoals met so far and the last :data:`PROGRESS_PREVIOUS` low-level instructions of
    ``previous`` (every earlier instruction, oldest first), e.g. ``"1/3 subgoals done. Previous:
    Tap 'Add'; Type the name."``; ``"... Nothing done yet."`` before the first step."""
    prev = list(previous)[-PROGRESS_PREVIOUS:]
    text = f"{done}/{total} subgoals done."
    return text + ((" Previous: " + "; ".join(prev) + ".") if prev else " Nothing done yet.")


@dataclass
class ExpertStep:
    """One recorded step: what was on screen and what the expert did."""

    screenshot: Image.Image | None
    elements: tuple[UIElement, ...]
    app: str
    screen: str
    action: Action
    low_level_instruction: str
    target_box: Box | None
    candidate_boxes: tuple[Box, ...]
    screen_description: str
    intention: str
    progress_summary: str
    subgoals_done: int
    functions: dict[str, str] = field(default_factory=dict)  # element_id -> what it does (grounding)


@dataclass
class Trajectory:
    task: Task
    steps: list[ExpertStep] = field(default_factory=list)
    success: bool = False  # env's own check at terminate
    reward: float = 0.0
    final_state: PhoneState | None = None


class _Player:
    def __init__(self, env: MiniGUIEnv, task: Task, rng: random.Random) -> None:
        self.env, self.task, self.rng = env, task, rng
        self.obs, _ = env.reset(options={"task": task})
        self.traj = Trajectory(task)
        self.intention = ""
        self.done = False

    @property
    def st(self) -> PhoneState:
        return self.env.state

    # ------------------------------------------------------------ primitives
    def do(self, action: Action, instr: str, target: A.Widget | None = None) -> None:
        sc = self.env.screen()
        status = self.task.subgoal_status(self.st)
        progress = progress_text(sum(status), len(status), [s.low_level_instruction for s in self.traj.steps])
        cands: tuple[Box, ...] = ()
        if action.type is ActionType.SCROLL and target is not None:
            cands = (tuple(round(v, 4) for v in target.box),)  # type: ignore[assignment]
        elif action.point is not None:
            x, y = action.point
            cands = tuple(
                tuple(round(v, 4) for v in w.box)
                for w in sc.widgets  # type: ignore[misc]
                if w.clickable and w.box[0] <= x <= w.box[2] and w.box[1] <= y <= w.box[3]
            )
        self.traj.steps.append(
            ExpertStep(
                screenshot=self.obs["screenshot"],
                elements=tuple(self.obs["elements"]),
                app=sc.app,
                screen=sc.name,
                action=action,
                low_level_instruction=instr,
                target_box=tuple(round(v, 4) for v in target.box) if target is not None else None,  # type: ignore[arg-type]
                candidate_boxes=cands,
                screen_description=sc.description,
                intention=self.intention,
                progress_summary=progress,
                subgoals_done=sum(status),
                functions={w.element_id: w.function for w in sc.widgets if w.function},
            )
        )
        self.obs, reward, term, trunc, info = self.env.step(action)
        if info["invalid"] is not None:
            raise ExpertError(
                f"{self.task.task_id} ({self.task.template_id}): '{instr}' was invalid: {info['invalid']}"
            )
        if trunc:
            raise ExpertError(f"{self.task.task_id}: ran out of steps ({self.env.max_steps})")
        if term:
            self.traj.success, self.traj.reward, self.done = bool(info["success"]), reward, True

    def w(self, eid: str) -> A.Widget:
        x = self.env.screen().find(eid)
        if x is None:
            raise ExpertError(f"{self.task.task_id}: no element {eid!r} on {self.st.ui.app}/{self.st.ui.screen}")
        return x

    def has(self, eid: str) -> bool:
        return self.env.screen().find(eid) is not None

    def tap(self, eid: str, instr: str) -> None:
        wd = self.w(eid)
        x1, y1, x2, y2 = wd.box
        pt = (round((x1 + x2) / 2, 4), round((y1 + y2) / 2, 4))
        self.do(Action(ActionType.CLICK, point=pt), instr, wd)

    def long_press(self, eid: str, instr: str) -> None:
        wd = self.w(eid)
        x1, y1, x2, y2 = wd.box
        pt = (round((x1 + x2) / 2, 4), round((y1 + y2) / 2, 4))
        self.do(Action(ActionType.LONG_PRESS, point=pt, duration_ms=1000), instr, wd)

    def type_in(self, field: str, label: str, text: str) -> None:
        if self.st.ui.focus != field:
            self.tap(f"form.{field}", f"Tap the {label} field")
        self.do(Action(ActionType.TYPE, text=text), f"Type '{text}' into the {label} field", self.w(f"form.{field}"))

    def press(self, key: str, instr: str) -> None:
        self.do(Action(ActionType.PRESS, key=key), instr)  # type: ignore[arg-type]

    def back(self, instr: str = "Go back") -> None:
        self.press("back", instr)

    def at_main(self, app: str) -> bool:
        ui = self.st.ui
        return ui.app == app and not ui.stack and ui.dialog is None

    def open(self, app: str) -> None:
        """Bring ``app``'s main screen up (and wait out the calendar's loading screen)."""
        ui = self.st.ui
        title = APP_TITLES[app]
        if ui.app == app and len(ui.stack) <= 2 and self.rng.random() < 0.8:
            while not self.at_main(app):
                self.back(f"Go back to the {title} main screen")
        if not self.at_main(app):
            r = self.rng.random()
            if r < 0.3:
                self.do(Action(ActionType.OPEN_APP, text=title), f"Open the {title} app")
            elif r < 0.4 and app in ui.recents and ui.app not in ("launcher", "recents"):
                self.press("recent", "Show the recent apps")
                self.tap(f"recents.card.{app}", f"Tap the {title} card in recent apps")
            else:
                if self.st.ui.app != "launcher":
                    self.press("home", "Go to the home screen")
                self.tap(f"launcher.icon.{app}", f"Tap the {title} icon")
        if self.st.ui.loading:
            self.do(Action(ActionType.WAIT, duration_ms=1000), f"Wait for {title} to load")

    def reveal(self, eid: str, index: int, what: str) -> None:
        """Scroll the current list until item ``index`` (0-based, list order) with id ``eid`` shows."""
        for _ in range(20):
            if self.has(eid):
                return
            sc = self.env.screen()
            lst = next(w for w in sc.widgets if w.scrollable)
            if index >= self.st.ui.scroll + A.PAGE:
                d, (p1, p2), word = "up", SWIPE_UP, "down"
            else:
                d, (p1, p2), word = "down", SWIPE_DOWN, "up"
            self.do(
                Action(ActionType.SCROLL, direction=d, convention="finger", point=p1, point2=p2),  # type: ignore[arg-type]
                f"Scroll {word} to find {what}",
                lst,
            )
        raise ExpertError(f"{self.task.task_id}: could not reveal {eid}")

    def find_contact(self, cid: int) -> str:
        cs = self.st.sorted_contacts()
        idx = next(i for i, c in enumerate(cs) if c.cid == cid)
        eid = f"contacts.item.{cid}"
        self.reveal(eid, idx, cs[idx].name)
        return eid

    def find_event(self, eid_: int) -> str:
        es = self.st.sorted_events()
        idx = next(i for i, e in enumerate(es) if e.eid == eid_)
        eid = f"calendar.item.{eid_}"
        self.reveal(eid, idx, f"the event {es[idx].title}")
        return eid

    def find_note(self, nid: int, prefix: str = "notes.check") -> str:
        idx = next(i for i, n in enumerate(self.st.notes) if n.nid == nid)
        eid = f"{prefix}.{nid}"
        self.reveal(eid, idx, f"the note {self.st.notes[idx].title}")
        return eid

    def answer(self, text: str) -> None:
        self.intention = "Report the answer"
        self.do(Action(ActionType.ANSWER, text=text), f"Answer '{text}'")

    def finish(self) -> None:
        self.intention = "Finish the task"
        self.do(Action(ActionType.TERMINATE, status="success"), "The task is complete")

    # ------------------------------------------------------------ macros
    def set_intent(self, s: str) -> None:
        self.intention = s

    def open_contact(self, cid: int) -> None:
        self.open("contacts")
        name = self.st.contact_by_id(cid).name  # type: ignore[union-attr]
        self.tap(self.find_contact(cid), f"Tap '{name}' in the contact list")

    def favorite(self, cid: int, via_menu: bool) -> None:
        c = self.st.contact_by_id(cid)
        assert c is not None
        if via_menu:
            if self.st.ui.screen != "list":
                self.open("contacts")
            self.long_press(self.find_contact(cid), f"Long-press '{c.name}' to open its menu")
            self.tap("menu.favorite", "Tap 'Add to favorites'")
        else:
            if not (self.st.ui.screen == "detail" and self.st.ui.params.get("cid") == cid):
                self.open_contact(cid)
            self.tap("contacts.favorite", f"Tap Favorite to add {c.name} to favorites")

    def send(self, peer: str, body: str) -> None:
        self.set_intent(f"Send '{body}' to {peer}")
        self.open("messages")
        th = [p for p, _ in self.st.threads()]
        lower = [p.lower() for p in th]
        if peer.lower() in lower and self.rng.random() < 0.5:
            i = lower.index(peer.lower())
            eid = f"messages.thread.{th[i].lower()}"
            self.reveal(eid, i, f"the conversation with {th[i]}")
            self.tap(eid, f"Open the conversation with {th[i]}")
            self.tap("messages.reply", "Tap Reply")
        else:
            self.tap("messages.compose", "Tap Compose to write a new message")
            self.type_in("to", "To", peer)
        self.type_in("body", "Message", body)
        self.tap("form.send", "Tap Send")

    def toggle(self, key: str, on: bool) -> None:
        lab = SETTING_LABELS[key]
        self.set_intent(f"Turn {'on' if on else 'off'} {lab}")
        self.open("settings")
        self.tap(f"settings.{key}", f"Tap the {lab} switch to turn it {'on' if on else 'off'}")
        if self.st.ui.dialog is not None:
            self.tap("dialog.ok", f"Tap OK to confirm turning on {lab}")

    def new_contact(self, name: str, phone: str, city: str | None) -> None:
        self.set_intent(f"Create the contact {name}")
        self.open("contacts")
        self.tap("contacts.new", "Tap '+ New' to add a contact")
        self.type_in("name", "Name", name)
        self.type_in("phone", "Phone", phone)
        if city is not None:
            self.type_in("city", "City", city)
        self.tap("form.save", "Tap Save")

    def new_note(self, title: str) -> None:
        self.set_intent(f"Create the note '{title}'")
        self.open("notes")
        self.tap("notes.new", "Tap '+ New' to add a note")
        self.type_in("title", "Title", title)
        self.tap("form.save", "Tap Save")


# ================================================================ solvers
def _look_up_event(p: _Player, q: dict) -> None:
    """Open Calendar, scroll to event ``q["eid"]`` and, half of the time, open its detail."""
    p.set_intent(f"Find the time of '{q['title']}'")
    p.open("calendar")
    eid = p.find_event(q["eid"])
    if p.rng.random() < 0.5:
        p.tap(eid, f"Tap the event '{q['title']}'")


def _solve(p: _Player, t: Task) -> None:  # noqa: C901 - one branch per template
    q = t.params
    tid = t.template_id
    st = p.st
    rnd = p.rng.random
    if tid == "contacts.add":
        p.new_contact(q["name"], q["phone"], q["city"])
    elif tid == "calendar.add":
        p.set_intent(f"Create the event '{q['title']}'")
        p.open("calendar")
        p.tap("calendar.new", "Tap '+ New' to add an event")
        p.type_in("title", "Title", q["title"])
        p.type_in("day", "Day", q["day"])
        p.type_in("time", "Time", q["time"])
        p.tap("form.save", "Tap Save")
    elif tid == "notes.add":
        p.new_note(q["title"])
    elif tid == "messages.send":
        p.send(q["peer"], q["body"])
    elif tid == "contacts.edit_phone":
        p.set_intent(f"Open {q['name']}'s contact page")
        p.open_contact(q["cid"])
        p.set_intent(f"Change {q['name']}'s phone number")
        p.tap("contacts.edit", "Tap Edit")
        p.type_in("phone", "Phone", q["phone"])
        p.tap("form.save", "Tap Save")
    elif tid == "contacts.favorite":
        p.set_intent(f"Add {q['name']} to favorites")
        p.open("contacts")
        p.favorite(q["cid"], via_menu=rnd() < 0.6)
    elif tid == "contacts.delete":
        p.set_intent(f"Delete {q['name']}")
        p.open("contacts")
        p.long_press(p.find_contact(q["cid"]), f"Long-press '{q['name']}' to open its menu")
        p.tap("menu.delete", "Tap Delete")
    elif tid == "notes.toggle":
        p.set_intent(f"Mark '{q['title']}' as {'done' if q['done'] else 'not done'}")
        p.open("notes")
        p.tap(p.find_note(q["nid"]), f"Tap the checkbox of '{q['title']}'")
    elif tid == "notes.rename":
        p.set_intent(f"Rename '{q['old']}'")
        p.open("notes")
        p.tap(p.find_note(q["nid"], "notes.item"), f"Tap the note '{q['old']}'")
        p.type_in("title", "Title", q["title"])
        p.tap("form.save", "Tap Save")
    elif tid == "settings.toggle":
        p.toggle(q["key"], q["on"])
    elif tid == "calendar.edit_time":
        p.set_intent(f"Open the event '{q['title']}'")
        p.open("calendar")
        p.tap(p.find_event(q["eid"]), f"Tap the event '{q['title']}'")
        p.set_intent(f"Change the time of '{q['title']}'")
        p.tap("calendar.edit", "Tap Edit")
        p.type_in("time", "Time", q["time"])
        p.tap("form.save", "Tap Save")
    elif tid == "contacts.query_phone":
        p.set_intent(f"Find {q['name']}'s phone number")
        p.open("contacts")
        p.find_contact(q["cid"])
        if rnd() < 0.4:
            p.tap(f"contacts.item.{q['cid']}", f"Tap '{q['name']}' in the contact list")
        p.answer(st.contact_by_id(q["cid"]).phone)  # type: ignore[union-attr]
    elif tid == "contacts.query_city":
        p.set_intent(f"Find {q['name']}'s city")
        p.open_contact(q["cid"])
        p.answer(st.contact_by_id(q["cid"]).city)  # type: ignore[union-attr]
    elif tid == "calendar.query_time":
        _look_up_event(p, q)
        p.answer(st.event_by_id(q["eid"]).time)  # type: ignore[union-attr]
    elif tid == "messages.query_last":
        p.set_intent(f"Read {q['peer']}'s last message")
        p.open("messages")
        th = [x for x, _ in st.threads()]
        i = th.index(q["peer"])
        eid = f"messages.thread.{q['peer'].lower()}"
        p.reveal(eid, i, f"the conversation with {q['peer']}")
        p.tap(eid, f"Open the conversation with {q['peer']}")
        p.answer(t.answer or "")
    elif tid == "settings.query":
        p.set_intent(f"Check {SETTING_LABELS[q['key']]}")
        p.open("settings")
        p.answer("on" if st.settings[q["key"]] else "off")
    elif tid == "notes.query_count":
        p.set_intent("Count the unfinished notes")
        p.open("notes")
        if len(st.notes) > A.PAGE:
            p.reveal(f"notes.check.{st.notes[-1].nid}", len(st.notes) - 1, "the last note")
        p.answer(str(sum(not n.done for n in st.notes)))
    elif tid == "settings.two_toggles":
        for k, on in zip(q["keys"], q["on"]):
            p.toggle(k, on)
    elif tid == "contacts.add_favorite":
        p.new_contact(q["name"], q["phone"], None)
        c = st.contact_by_name(q["name"])
        assert c is not None
        p.set_intent(f"Add {q['name']} to favorites")
        p.favorite(c.cid, via_menu=rnd() < 0.5)
    elif tid == "notes.add_done":
        p.new_note(q["title"])
        n = st.note_by_title(q["title"])
        assert n is not None
        p.set_intent(f"Mark '{q['title']}' as done")
        p.tap(p.find_note(n.nid), f"Tap the checkbox of '{q['title']}'")
    elif tid == "cross.share_phone":
        p.set_intent(f"Look up {q['a']}'s phone number")
        p.open("contacts")
        p.find_contact(q["acid"])
        if rnd() < 0.5:
            p.tap(f"contacts.item.{q['acid']}", f"Tap '{q['a']}' in the contact list")
        p.send(q["b"], st.contact_by_id(q["acid"]).phone)  # type: ignore[union-attr]
    elif tid == "cross.note_phone":
        p.set_intent(f"Look up {q['a']}'s phone number")
        p.open("contacts")
        p.find_contact(q["acid"])
        p.new_note(st.contact_by_id(q["acid"]).phone)  # type: ignore[union-attr]
    elif tid == "cross.event_to_msg":
        _look_up_event(p, q)
        e = st.event_by_id(q["eid"])
        assert e is not None
        p.send(q["b"], f"{e.title} is at {e.time}")
    elif tid in ("loop.fav_city", "loop.msg_city"):
        first = [c.cid for c in st.sorted_contacts()[:4]]
        matches: list[str] = []
        p.open("contacts")
        for k, cid in enumerate(first):
            c = st.contact_by_id(cid)
            assert c is not None
            p.set_intent(f"Check the city of contact {k + 1} of 4 ({c.name})")
            p.tap(p.find_contact(cid), f"Tap '{c.name}' in the contact list")
            if c.city == q["city"]:
                if tid == "loop.fav_city" and not c.favorite:
                    p.set_intent(f"{c.name} lives in {c.city}: add to favorites")
                    p.tap("contacts.favorite", f"Tap Favorite to add {c.name} to favorites")
                matches.append(c.name)
            p.back("Go back to the contact list")
        for name in matches if tid == "loop.msg_city" else []:
            p.send(name, q["body"])
    elif tid == "loop.notes_done":
        p.open("notes")
        for n in list(st.notes):
            if not n.done:
                p.set_intent(f"Mark every unfinished note as done ('{n.title}')")
                p.tap(p.find_note(n.nid), f"Tap the checkbox of '{n.title}'")
    else:
        raise ExpertError(f"no expert for template {tid!r}")
    p.finish()


def solve(
    task: Task, env: MiniGUIEnv | None = None, seed: int = 0, render: bool = True, width: int = 280, height: int = 504
) -> Trajectory:
    """Play ``task`` to the end with the scripted expert; ``success`` is the env's own check.

    ``seed`` drives only the navigation style (``Random(f"{seed}-{task_id}")``), so the
    trajectory is a deterministic function of (task, seed). Raises :class:`ExpertError` if an
    action is invalid or the step limit is hit.
    """
    env = env or MiniGUIEnv(width=width, height=height, render=render)
    p = _Player(env, task, random.Random(f"{seed}-{task.task_id}"))
    _solve(p, task)
    p.traj.final_state = env.state_snapshot()
    return p.traj


def trajectory_to_episode(
    traj: Trajectory,
    screenshot_paths: list[str],
    split: str = "train",
    screen_size: tuple[int, int] = (280, 504),
    extra: dict[str, Any] | None = None,
) -> Episode:
    """An :class:`Episode` from a trajectory; ``screenshot_paths[i]`` is step i's image path (relative)."""
    if len(screenshot_paths) != len(traj.steps):
        raise ValueError(f"{traj.task.task_id}: {len(screenshot_paths)} paths for {len(traj.steps)} steps")
    t = traj.task
    steps = tuple(
        Step(
            step_id=i,
            screenshot=path,
            screen_size=screen_size,
            action=s.action,
            low_level_instruction=s.low_level_instruction,
            target_box=s.target_box,
            candidate_boxes=s.candidate_boxes,
            elements=s.elements,
            screen_description=s.screen_description,
            intention=s.intention,
            progress_summary=s.progress_summary,
            extra={"app": s.app, "screen": s.screen, "subgoals_done": s.subgoals_done},
        )
        for i, (s, path) in enumerate(zip(traj.steps, screenshot_paths))
    )
    return Episode(
        episode_id=t.task_id,
        instruction=t.instruction,
        steps=steps,
        source="minigui",
        split=split,
        app=t.apps[0],
        apps=t.apps,
        category=t.category,
        subgoals=tuple(d for d, _ in t.subgoals),
        success=traj.success,
        extra={"template_id": t.template_id, "answer": t.answer, "task": t.to_dict(), **(extra or {})},
    )
