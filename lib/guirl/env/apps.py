"""MiniGUI apps: each screen as a list of widgets with normalised boxes and handlers.

A screen is rebuilt from :class:`~guirl.env.state.PhoneState` on every step by
:func:`build_screen`; the env hit-tests a click against it, calls the widget's handler, and
renders it. Handlers mutate the state and return ``None`` (something happened) or a reason
string (nothing happened, e.g. ``"Name is required"``): a handler that returns a reason must
leave the state unchanged.

Layout units: every box is ``(x1, y1, x2, y2)`` normalised by screen width and height, so the
same layout renders at 280x504 or 1080x2400. Fixed regions: title bar ``y in [0, 0.08]``,
content rows ``row(i) = (0.04, 0.10 + 0.1 i, 0.96, 0.19 + 0.1 i)``, bottom action buttons at
``y in [0.80, 0.89]``, navigation bar ``y in [0.92, 1]`` (back, home, recent apps).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from guirl.env.state import APP_TITLES, APPS, SETTING_LABELS, SETTINGS, PhoneState, UIState

Box = tuple[float, float, float, float]
Handler = Callable[[PhoneState], "str | None"]

#: Visible list rows per page, and items moved by one scroll.
PAGE = 6
SCROLL_STEP = 5
DAYS: tuple[str, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")

TITLE_BOX: Box = (0.0, 0.0, 1.0, 0.08)
LIST_BOX: Box = (0.0, 0.09, 1.0, 0.79)
LEFT_BTN: Box = (0.04, 0.80, 0.48, 0.89)
RIGHT_BTN: Box = (0.52, 0.80, 0.96, 0.89)
MORE_BOX: Box = (0.30, 0.705, 0.70, 0.775)
DIALOG_BOX: Box = (0.08, 0.34, 0.92, 0.66)
NAV_BOXES: dict[str, Box] = {
    "back": (0.05, 0.925, 0.29, 0.995),
    "home": (0.38, 0.925, 0.62, 0.995),
    "recent": (0.71, 0.925, 0.95, 0.995),
}
#: Main screen of each app (where ``open_app`` lands).
MAIN_SCREEN: dict[str, str] = {
    "launcher": "home",
    "contacts": "list",
    "messages": "inbox",
    "notes": "list",
    "settings": "main",
    "calendar": "list",
    "recents": "recents",
}
#: Form fields per form screen: (field name, label).
FORM_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "contacts.form": (("name", "Name"), ("phone", "Phone"), ("city", "City")),
    "messages.compose": (("to", "To"), ("body", "Message")),
    "notes.form": (("title", "Title"),),
    "calendar.form": (("title", "Title"), ("day", "Day"), ("time", "Time")),
}


def row(i: int) -> Box:
    """Box of content row ``i`` (0-based), normalised."""
    return (0.04, 0.10 + 0.1 * i, 0.96, 0.19 + 0.1 * i)


@dataclass
class Widget:
    """A drawable, hit-testable element. ``role`` picks its look in :mod:`guirl.env.render`."""

    element_id: str
    box: Box
    label: str
    role: str  # title, icon, list_item, checkbox, button, input, toggle, text, bubble, card, nav, menu_item, list, loading
    on_click: Handler | None = None
    on_long_press: Handler | None = None
    text: str = ""  # secondary text (phone under a name, value of an input, "on"/"off")
    function: str = ""  # what the element does, for function-to-point grounding
    style: dict[str, Any] = field(default_factory=dict)  # colour, checked, focused, ...
    scrollable: bool = False

    @property
    def clickable(self) -> bool:
        return self.on_click is not None or self.on_long_press is not None


@dataclass
class Screen:
    """Widgets in paint order (later ones are on top), plus scroll facts."""

    app: str
    name: str
    title: str
    widgets: list[Widget]
    scroll_len: int = 0  # number of items of the scrollable list (0: not scrollable)
    description: str = ""
    dialog: bool = False  # a modal dialog is open (clicks outside it close it)
    background: list[Widget] = field(default_factory=list)  # drawn dimmed under a dialog; not in the tree

    def hit(self, p: tuple[float, float]) -> Widget | None:
        """Topmost clickable widget containing normalised point ``p``; else the topmost widget."""
        x, y = p
        inside = [w for w in self.widgets if w.box[0] <= x <= w.box[2] and w.box[1] <= y <= w.box[3]]
        for w in reversed(inside):
            if w.clickable:
                return w
        return inside[-1] if inside else None

    def find(self, element_id: str) -> Widget | None:
        return next((w for w in self.widgets if w.element_id == element_id), None)


# ============================================================== navigation
def open_app(st: PhoneState, app: str) -> None:
    """Show ``app``'s main screen with a fresh stack; record it in recent apps."""
    ui = st.ui
    recents = [a for a in ui.recents if a != app]
    if app in APPS:
        recents = [app] + recents
    st.ui = UIState(app=app, screen=MAIN_SCREEN[app], recents=recents[:5], loading=(app == "calendar"))


def push(st: PhoneState, screen: str, params: dict[str, Any] | None = None, form: dict[str, str] | None = None) -> None:
    """Open ``screen`` of the current app on top of the navigation stack."""
    ui = st.ui
    ui.stack.append({"screen": ui.screen, "params": dict(ui.params), "scroll": ui.scroll})
    ui.screen, ui.params, ui.scroll = screen, dict(params or {}), 0
    ui.focus, ui.dialog = None, None
    ui.form = dict(form or {})


def go_back(st: PhoneState) -> str | None:
    """System back: close a dialog, else pop a screen, else leave the app for home."""
    ui = st.ui
    if ui.dialog is not None:
        ui.dialog = None
        return None
    if ui.stack:
        top = ui.stack.pop()
        ui.screen, ui.params, ui.scroll = top["screen"], top["params"], top["scroll"]
        ui.focus, ui.form = None, {}
        return None
    if ui.app == "launcher":
        return "already on the home screen"
    open_app(st, "launcher")
    return None


def go_home(st: PhoneState) -> str | None:
    if st.ui.app == "launcher" and not st.ui.stack and st.ui.dialog is None:
        return "already on the home screen"
    open_app(st, "launcher")
    return None


def go_recents(st: PhoneState) -> str | None:
    if st.ui.app == "recents":
        return "already showing recent apps"
    open_app(st, "recents")
    return None


def resolve_app(name: str) -> str | None:
    """App id for an ``open_app`` argument (id or display name, case-insensitive)."""
    key = name.strip().lower()
    for app in APPS:
        if key in (app, APP_TITLES[app].lower()):
            return app
    return None


# ============================================================== handlers
def _focus(name: str) -> Handler:
    def h(st: PhoneState) -> str | None:
        if st.ui.focus == name:
            return "field already focused"
        st.ui.focus = name
        return None

    return h


def _norm_day(s: str) -> str | None:
    k = s.strip()[:3].lower()
    return next((d for d in DAYS if d.lower() == k), None) if len(s.strip()) >= 3 else None


def _save_contact(st: PhoneState) -> str | None:
    f = {k: st.ui.form.get(k, "").strip() for k in ("name", "phone", "city")}
    if not f["name"]:
        return "Name is required"
    cid = st.ui.params.get("cid")
    c = st.contact_by_id(cid) if cid is not None else None
    if c is None:
        from guirl.env.state import Contact

        st.contacts.append(Contact(cid=st.new_id(), name=f["name"], phone=f["phone"], city=f["city"]))
    else:
        c.name, c.phone, c.city = f["name"], f["phone"], f["city"]
    go_back(st)
    return None


def _save_note(st: PhoneState) -> str | None:
    title = st.ui.form.get("title", "").strip()
    if not title:
        return "Title is required"
    nid = st.ui.params.get("nid")
    n = st.note_by_id(nid) if nid is not None else None
    if n is None:
        from guirl.env.state import Note

        st.notes.append(Note(nid=st.new_id(), title=title))
    else:
        n.title = title
    go_back(st)
    return None


def _save_event(st: PhoneState) -> str | None:
    title = st.ui.form.get("title", "").strip()
    day = _norm_day(st.ui.form.get("day", ""))
    time = st.ui.form.get("time", "").strip()
    if not title:
        return "Title is required"
    if day is None:
        return "Day must be one of Mon..Sun"
    if not TIME_RE.match(time):
        return "Time must be HH:MM"
    eid = st.ui.params.get("eid")
    e = st.event_by_id(eid) if eid is not None else None
    if e is None:
        from guirl.env.state import Event

        st.events.append(Event(eid=st.new_id(), title=title, day=day, time=time))
    else:
        e.title, e.day, e.time = title, day, time
    go_back(st)
    return None


def _send(st: PhoneState) -> str | None:
    to = st.ui.form.get("to", "").strip()
    body = st.ui.form.get("body", "").strip()
    if not to:
        return "Recipient is required"
    if not body:
        return "Message is empty"
    from guirl.env.state import Message

    st.messages.append(Message(peer=to, body=body, outgoing=True))
    go_back(st)
    if st.ui.screen == "inbox":
        push(st, "thread", {"peer": to})
    return None


def _toggle_setting(key: str) -> Handler:
    def h(st: PhoneState) -> str | None:
        if key == "airplane" and not st.settings[key]:
            st.ui.dialog = {"kind": "confirm", "setting": key}
        else:
            st.settings[key] = not st.settings[key]
        return None

    return h


def _close_dialog(st: PhoneState) -> str | None:
    st.ui.dialog = None
    return None


# ============================================================== screens
def _nav(ws: list[Widget]) -> None:
    fn = {"back": "goes back", "home": "goes to the home screen", "recent": "shows recent apps"}
    act = {"back": go_back, "home": go_home, "recent": go_recents}
    for k, b in NAV_BOXES.items():
        label = {"back": "Back", "home": "Home", "recent": "Recent apps"}[k]
        ws.append(Widget(f"nav.{k}", b, label, "nav", on_click=act[k], function=fn[k], style={"kind": k}))


def _title(ws: list[Widget], app: str, title: str) -> None:
    ws.append(Widget("title", TITLE_BOX, title, "title", style={"app": app}))


def _list_page(st: PhoneState, n: int) -> tuple[int, int]:
    start = max(0, min(st.ui.scroll, max(0, n - PAGE)))
    return start, min(n, start + PAGE)


def _more(ws: list[Widget], end: int, n: int, app: str) -> None:
    ws.append(Widget(f"{app}.list", LIST_BOX, f"{APP_TITLES[app]} list", "list", scrollable=True))
    if end < n:
        ws.append(Widget(f"{app}.more", MORE_BOX, "More below", "text", style={"hint": True}))


def _launcher(st: PhoneState, ws: list[Widget]) -> tuple[str, str]:
    for i, app in enumerate(APPS):
        cx = (0.2, 0.5, 0.8)[i % 3]
        y = 0.12 + 0.2 * (i // 3)
        ws.append(
            Widget(
                f"launcher.icon.{app}",
                (cx - 0.14, y, cx + 0.14, y + 0.17),
                APP_TITLES[app],
                "icon",
                on_click=lambda s, a=app: open_app(s, a),
                function=f"opens {APP_TITLES[app]}",
                style={"app": app},
            )
        )
    return "Home", "Home screen with app icons: " + ", ".join(APP_TITLES[a] for a in APPS)


def _recents(st: PhoneState, ws: list[Widget]) -> tuple[str, str]:
    _title(ws, "recents", "Recent apps")
    for i, app in enumerate(st.ui.recents[:PAGE]):
        ws.append(
            Widget(
                f"recents.card.{app}",
                row(i),
                APP_TITLES[app],
                "card",
                on_click=lambda s, a=app: open_app(s, a),
                function=f"reopens {APP_TITLES[app]}",
                style={"app": app},
            )
        )
    if not st.ui.recents:
        ws.append(Widget("recents.empty", row(0), "No recent apps", "text"))
    names = ", ".join(APP_TITLES[a] for a in st.ui.recents) or "none"
    return "Recent apps", f"Recent apps screen listing: {names}"


def _form(st: PhoneState, ws: list[Widget], key: str) -> None:
    for i, (name, label) in enumerate(FORM_FIELDS[key]):
        ws.append(
            Widget(
                f"form.{name}",
                row(i),
                label,
                "input",
                on_click=_focus(name),
                text=st.ui.form.get(name, ""),
                function=f"enters the {label.lower()}",
                style={"focused": st.ui.focus == name},
            )
        )


def _contacts(st: PhoneState, ws: list[Widget]) -> tuple[str, str, int]:
    ui = st.ui
    if ui.screen == "list":
        _title(ws, "contacts", "Contacts")
        cs = st.sorted_contacts()
        a, b = _list_page(st, len(cs))
        for i, c in enumerate(cs[a:b]):

            def click(s: PhoneState, cid: int = c.cid) -> None:
                push(s, "detail", {"cid": cid})

            def lp(s: PhoneState, cid: int = c.cid) -> None:
                s.ui.dialog = {"kind": "menu", "cid": cid}

            ws.append(
                Widget(
                    f"contacts.item.{c.cid}",
                    row(i),
                    c.name,
                    "list_item",
                    on_click=click,
                    on_long_press=lp,
                    text=c.phone,
                    function=f"opens the contact {c.name}",
                    style={"favorite": c.favorite},
                )
            )
        _more(ws, b, len(cs), "contacts")
        ws.append(
            Widget(
                "contacts.new",
                RIGHT_BTN,
                "+ New",
                "button",
                on_click=lambda s: push(s, "form", {}, {"name": "", "phone": "", "city": ""}),
                function="adds a new contact",
                style={"color": "blue"},
            )
        )
        shown = ", ".join(c.name for c in cs[a:b])
        return "Contacts", f"Contacts list showing {shown or 'no contacts'} ({b - a} of {len(cs)})", len(cs)
    if ui.screen == "detail":
        c = st.contact_by_id(ui.params.get("cid", -1))
        if c is None:  # deleted underneath: show the list again
            go_back(st)
            return _contacts(st, ws)
        _title(ws, "contacts", c.name)
        ws.append(Widget("contacts.detail.phone", row(0), "Phone", "text", text=c.phone or "-"))
        ws.append(Widget("contacts.detail.city", row(1), "City", "text", text=c.city or "-"))
        ws.append(Widget("contacts.detail.favorite", row(2), "Favorite", "text", text="yes" if c.favorite else "no"))

        def edit(s: PhoneState, c=c) -> None:
            push(s, "form", {"cid": c.cid}, {"name": c.name, "phone": c.phone, "city": c.city})

        def fav(s: PhoneState, cid: int = c.cid) -> None:
            x = s.contact_by_id(cid)
            assert x is not None
            x.favorite = not x.favorite

        ws.append(
            Widget(
                "contacts.edit",
                LEFT_BTN,
                "Edit",
                "button",
                on_click=edit,
                function=f"edits {c.name}",
                style={"color": "blue"},
            )
        )
        lab = "Unfavorite" if c.favorite else "Favorite"
        ws.append(
            Widget(
                "contacts.favorite",
                RIGHT_BTN,
                lab,
                "button",
                on_click=fav,
                function=("removes " if c.favorite else "adds ")
                + f"{c.name}"
                + (" from favorites" if c.favorite else " to favorites"),
                style={"color": "amber"},
            )
        )
        return c.name, f"Contact details of {c.name}: phone {c.phone}, city {c.city}", 0
    # form
    new = "cid" not in ui.params
    _title(ws, "contacts", "New contact" if new else "Edit contact")
    _form(st, ws, "contacts.form")
    ws.append(
        Widget(
            "form.save",
            RIGHT_BTN,
            "Save",
            "button",
            on_click=_save_contact,
            function="saves the contact",
            style={"color": "green"},
        )
    )
    return ("New contact" if new else "Edit contact"), "Contact form with Name, Phone and City fields", 0


def _messages(st: PhoneState, ws: list[Widget]) -> tuple[str, str, int]:
    ui = st.ui
    if ui.screen == "inbox":
        _title(ws, "messages", "Messages")
        th = st.threads()
        a, b = _list_page(st, len(th))
        for i, (peer, msgs) in enumerate(th[a:b]):
            ws.append(
                Widget(
                    f"messages.thread.{peer.lower()}",
                    row(i),
                    peer,
                    "list_item",
                    on_click=lambda s, p=peer: push(s, "thread", {"peer": p}),
                    text=msgs[-1].body,
                    function=f"opens the conversation with {peer}",
                )
            )
        _more(ws, b, len(th), "messages")
        ws.append(
            Widget(
                "messages.compose",
                RIGHT_BTN,
                "Compose",
                "button",
                on_click=lambda s: push(s, "compose", {}, {"to": "", "body": ""}),
                function="writes a new message",
                style={"color": "blue"},
            )
        )
        shown = ", ".join(p for p, _ in th[a:b])
        return "Messages", f"Message inbox with conversations: {shown or 'none'}", len(th)
    if ui.screen == "thread":
        peer = ui.params.get("peer", "")
        _title(ws, "messages", peer)
        msgs = [m for m in st.messages if m.peer.lower() == peer.lower()][-5:]
        for i, m in enumerate(msgs):
            x1, x2 = (0.30, 0.96) if m.outgoing else (0.04, 0.70)
            r = row(i)
            ws.append(
                Widget(
                    f"messages.msg.{i}",
                    (x1, r[1], x2, r[3]),
                    m.body,
                    "bubble",
                    text="sent" if m.outgoing else "received",
                    style={"outgoing": m.outgoing},
                )
            )
        ws.append(
            Widget(
                "messages.reply",
                RIGHT_BTN,
                "Reply",
                "button",
                on_click=lambda s, p=peer: push(s, "compose", {}, {"to": p, "body": ""}),
                function=f"replies to {peer}",
                style={"color": "blue"},
            )
        )
        last_in = next((m.body for m in reversed(msgs) if not m.outgoing), "")
        return peer, f"Conversation with {peer}; last received: '{last_in}'", 0
    _title(ws, "messages", "New message")
    _form(st, ws, "messages.compose")
    ws.append(
        Widget(
            "form.send",
            RIGHT_BTN,
            "Send",
            "button",
            on_click=_send,
            function="sends the message",
            style={"color": "green"},
        )
    )
    return "New message", "Compose screen with To and Message fields", 0


def _notes(st: PhoneState, ws: list[Widget]) -> tuple[str, str, int]:
    ui = st.ui
    if ui.screen == "list":
        _title(ws, "notes", "Notes")
        ns = st.notes
        a, b = _list_page(st, len(ns))
        for i, n in enumerate(ns[a:b]):
            r = row(i)

            def tick(s: PhoneState, nid: int = n.nid) -> None:
                x = s.note_by_id(nid)
                assert x is not None
                x.done = not x.done

            ws.append(
                Widget(
                    f"notes.item.{n.nid}",
                    (0.20, r[1], r[2], r[3]),
                    n.title,
                    "list_item",
                    on_click=lambda s, n=n: push(s, "form", {"nid": n.nid}, {"title": n.title}),
                    text="done" if n.done else "",
                    function=f"opens the note {n.title}",
                    style={"done": n.done, "avatar": False},
                )
            )
            ws.append(
                Widget(
                    f"notes.check.{n.nid}",
                    (r[0], r[1], 0.18, r[3]),
                    f"Done: {n.title}",
                    "checkbox",
                    on_click=tick,
                    text="checked" if n.done else "unchecked",
                    function=("marks " + n.title + (" as not done" if n.done else " as done")),
                    style={"checked": n.done},
                )
            )
        _more(ws, b, len(ns), "notes")
        ws.append(
            Widget(
                "notes.new",
                RIGHT_BTN,
                "+ New",
                "button",
                on_click=lambda s: push(s, "form", {}, {"title": ""}),
                function="adds a new note",
                style={"color": "blue"},
            )
        )
        shown = ", ".join(n.title + (" (done)" if n.done else "") for n in ns[a:b])
        return "Notes", f"Notes list: {shown or 'no notes'}", len(ns)
    new = "nid" not in ui.params
    _title(ws, "notes", "New note" if new else "Edit note")
    _form(st, ws, "notes.form")
    ws.append(
        Widget(
            "form.save",
            RIGHT_BTN,
            "Save",
            "button",
            on_click=_save_note,
            function="saves the note",
            style={"color": "green"},
        )
    )
    if not new:

        def delete(s: PhoneState) -> None:
            s.notes = [n for n in s.notes if n.nid != s.ui.params.get("nid")]
            go_back(s)

        ws.append(
            Widget(
                "form.delete",
                LEFT_BTN,
                "Delete",
                "button",
                on_click=delete,
                function="deletes the note",
                style={"color": "red"},
            )
        )
    return ("New note" if new else "Edit note"), "Note editor with a Title field", 0


def _settings(st: PhoneState, ws: list[Widget]) -> tuple[str, str, int]:
    _title(ws, "settings", "Settings")
    for i, k in enumerate(SETTINGS):
        on = st.settings[k]
        lab = SETTING_LABELS[k]
        ws.append(
            Widget(
                f"settings.{k}",
                row(i),
                lab,
                "toggle",
                on_click=_toggle_setting(k),
                text="on" if on else "off",
                function=f"turns {'off' if on else 'on'} {lab}",
                style={"on": on},
            )
        )
    desc = ", ".join(f"{SETTING_LABELS[k]} {'on' if st.settings[k] else 'off'}" for k in SETTINGS)
    return "Settings", f"Settings: {desc}", 0


def _calendar(st: PhoneState, ws: list[Widget]) -> tuple[str, str, int]:
    ui = st.ui
    if ui.screen == "list":
        _title(ws, "calendar", "Calendar")
        if ui.loading:
            ws.append(Widget("calendar.loading", (0.2, 0.35, 0.8, 0.55), "Loading...", "loading"))
            return "Calendar", "Calendar is loading; nothing to tap yet", 0
        es = st.sorted_events()
        a, b = _list_page(st, len(es))
        for i, e in enumerate(es[a:b]):
            ws.append(
                Widget(
                    f"calendar.item.{e.eid}",
                    row(i),
                    e.title,
                    "list_item",
                    on_click=lambda s, e=e: push(s, "detail", {"eid": e.eid}),
                    text=f"{e.day} {e.time}",
                    function=f"opens the event {e.title}",
                    style={"avatar": "cal"},
                )
            )
        _more(ws, b, len(es), "calendar")
        ws.append(
            Widget(
                "calendar.new",
                RIGHT_BTN,
                "+ New",
                "button",
                on_click=lambda s: push(s, "form", {}, {"title": "", "day": "", "time": ""}),
                function="adds a new event",
                style={"color": "blue"},
            )
        )
        shown = ", ".join(e.title for e in es[a:b])
        return "Calendar", f"Calendar events: {shown or 'none'}", len(es)
    if ui.screen == "detail":
        e = st.event_by_id(ui.params.get("eid", -1))
        if e is None:
            go_back(st)
            return _calendar(st, ws)
        _title(ws, "calendar", e.title)
        ws.append(Widget("calendar.detail.day", row(0), "Day", "text", text=e.day))
        ws.append(Widget("calendar.detail.time", row(1), "Time", "text", text=e.time))
        ws.append(
            Widget(
                "calendar.edit",
                LEFT_BTN,
                "Edit",
                "button",
                on_click=lambda s, e=e: push(
                    s, "form", {"eid": e.eid}, {"title": e.title, "day": e.day, "time": e.time}
                ),
                function=f"edits the event {e.title}",
                style={"color": "blue"},
            )
        )
        return e.title, f"Event {e.title} on {e.day} at {e.time}", 0
    new = "eid" not in ui.params
    _title(ws, "calendar", "New event" if new else "Edit event")
    _form(st, ws, "calendar.form")
    ws.append(
        Widget(
            "form.save",
            RIGHT_BTN,
            "Save",
            "button",
            on_click=_save_event,
            function="saves the event",
            style={"color": "green"},
        )
    )
    return ("New event" if new else "Edit event"), "Event form with Title, Day and Time fields", 0


def _dialog(st: PhoneState, ws: list[Widget]) -> str:
    d = st.ui.dialog or {}
    x1, y1, x2, y2 = DIALOG_BOX
    if d.get("kind") == "menu":
        c = st.contact_by_id(d.get("cid", -1))
        if c is None:
            st.ui.dialog = None
            return ""
        ws.append(Widget("dialog", DIALOG_BOX, c.name, "dialog"))

        def fav(s: PhoneState, cid: int = c.cid) -> None:
            x = s.contact_by_id(cid)
            assert x is not None
            x.favorite = not x.favorite
            s.ui.dialog = None

        def delete(s: PhoneState, cid: int = c.cid) -> None:
            s.contacts = [x for x in s.contacts if x.cid != cid]
            s.ui.dialog = None

        items: list[tuple[str, str, Handler, str]] = [
            (
                "favorite",
                "Remove favorite" if c.favorite else "Add to favorites",
                fav,
                ("removes " if c.favorite else "adds ")
                + c.name
                + (" from favorites" if c.favorite else " to favorites"),
            ),
            ("delete", "Delete", delete, f"deletes {c.name}"),
            ("cancel", "Cancel", _close_dialog, "closes the menu"),
        ]
        for i, (k, lab, h, fn) in enumerate(items):
            yy = y1 + 0.075 + 0.075 * i
            ws.append(
                Widget(
                    f"menu.{k}",
                    (x1 + 0.03, yy, x2 - 0.03, yy + 0.065),
                    lab,
                    "menu_item",
                    on_click=h,
                    function=fn,
                    style={"danger": k == "delete"},
                )
            )
        return f"Menu for {c.name}: Add/Remove favorites, Delete, Cancel"
    if d.get("kind") == "confirm":
        key = d.get("setting", "airplane")
        lab = SETTING_LABELS[key]
        ws.append(Widget("dialog", DIALOG_BOX, f"Turn on {lab}?", "dialog"))

        def ok(s: PhoneState, key: str = key) -> None:
            s.settings[key] = True
            s.ui.dialog = None

        ws.append(
            Widget(
                "dialog.cancel",
                (x1 + 0.04, y2 - 0.11, 0.48, y2 - 0.03),
                "Cancel",
                "button",
                on_click=_close_dialog,
                function="cancels",
                style={"color": "gray"},
            )
        )
        ws.append(
            Widget(
                "dialog.ok",
                (0.52, y2 - 0.11, x2 - 0.04, y2 - 0.03),
                "OK",
                "button",
                on_click=ok,
                function=f"confirms turning on {lab}",
                style={"color": "green"},
            )
        )
        return f"Dialog asking to confirm turning on {lab}"
    return ""


_BUILDERS = {
    "contacts": _contacts,
    "messages": _messages,
    "notes": _notes,
    "settings": _settings,
    "calendar": _calendar,
}


def build_screen(st: PhoneState) -> Screen:
    """The current screen of ``st`` (pure apart from healing a stale UI, e.g. a deleted contact)."""
    ws: list[Widget] = []
    ui = st.ui
    scroll_len = 0
    if ui.app == "launcher":
        title, desc = _launcher(st, ws)
    elif ui.app == "recents":
        title, desc = _recents(st, ws)
    else:
        title, desc, scroll_len = _BUILDERS[ui.app](st, ws)
    dialog = False
    background: list[Widget] = []
    if ui.dialog is not None:
        k = len(ws)
        d = _dialog(st, ws)
        if d:
            desc, dialog = d, True
            background, ws = ws[:k], [w for w in ws[:k] if w.role == "title"] + ws[k:]
    _nav(ws)
    return Screen(
        ui.app,
        ui.screen,
        title,
        ws,
        scroll_len=0 if dialog else scroll_len,
        description=desc,
        dialog=dialog,
        background=background,
    )
