"""MiniGUI app state: the data every app shows and every task predicate checks.

The state is plain data (dataclasses of str/int/bool/lists) so that it can be deep-copied,
compared, and written as JSON (``to_dict`` / ``from_dict`` round-trip exactly). Task success
is a predicate over this state, never over the action sequence.

Two halves:

* the *world* (``contacts``, ``notes``, ``events``, ``messages``, ``settings``) — what a task
  asks to change or query;
* the *UI* (:class:`UIState`) — which app/screen is shown, scroll offset, focused field,
  open dialog, navigation stack, recent apps, loading flag. Tasks never check the UI half.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Apps a user can open, in launcher order (the launcher itself is app ``"launcher"``).
APPS: tuple[str, ...] = ("contacts", "messages", "notes", "settings", "calendar")
#: Display names (what ``open_app`` accepts, case-insensitive, besides the ids above).
APP_TITLES: dict[str, str] = {
    "launcher": "Home",
    "contacts": "Contacts",
    "messages": "Messages",
    "notes": "Notes",
    "settings": "Settings",
    "calendar": "Calendar",
    "recents": "Recent apps",
}
#: Settings toggles in screen order, with their display labels.
SETTINGS: tuple[str, ...] = ("wifi", "bluetooth", "dark_mode", "airplane", "location")
SETTING_LABELS: dict[str, str] = {
    "wifi": "Wi-Fi",
    "bluetooth": "Bluetooth",
    "dark_mode": "Dark mode",
    "airplane": "Airplane mode",
    "location": "Location",
}


@dataclass
class Contact:
    cid: int  # stable id (names can be edited)
    name: str
    phone: str
    city: str
    favorite: bool = False


@dataclass
class Note:
    nid: int
    title: str
    done: bool = False


@dataclass
class Event:
    eid: int
    title: str
    day: str  # "Mon" .. "Sun"
    time: str  # "HH:MM", 24 h


@dataclass
class Message:
    peer: str  # the other person's name
    body: str
    outgoing: bool  # True: sent by the user


@dataclass
class UIState:
    """What is on screen. ``scroll`` is the index of the first visible list item."""

    app: str = "launcher"
    screen: str = "home"
    params: dict[str, Any] = field(default_factory=dict)  # e.g. {"cid": 3}
    stack: list[dict[str, Any]] = field(default_factory=list)  # [{"app","screen","params"}]
    scroll: int = 0
    focus: str | None = None  # focused form field name
    form: dict[str, str] = field(default_factory=dict)  # form field values
    dialog: dict[str, Any] | None = None  # {"kind": "menu"|"confirm", ...}
    loading: bool = False
    recents: list[str] = field(default_factory=list)  # most recent first


@dataclass
class PhoneState:
    contacts: list[Contact] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)  # chronological
    settings: dict[str, bool] = field(default_factory=lambda: {k: False for k in SETTINGS})
    answer: str | None = None  # last ``answer`` action's text
    ui: UIState = field(default_factory=UIState)
    next_id: int = 1000  # id for the next created contact/note/event

    # ------------------------------------------------------------------ queries
    def sorted_contacts(self) -> list[Contact]:
        """Contacts in list order (by name, case-insensitive; ties by id)."""
        return sorted(self.contacts, key=lambda c: (c.name.lower(), c.cid))

    def contact_by_name(self, name: str) -> Contact | None:
        key = name.strip().lower()
        for c in self.sorted_contacts():
            if c.name.strip().lower() == key:
                return c
        return None

    def contact_by_id(self, cid: int) -> Contact | None:
        return next((c for c in self.contacts if c.cid == cid), None)

    def note_by_title(self, title: str) -> Note | None:
        key = title.strip().lower()
        return next((n for n in self.notes if n.title.strip().lower() == key), None)

    def note_by_id(self, nid: int) -> Note | None:
        return next((n for n in self.notes if n.nid == nid), None)

    def event_by_title(self, title: str) -> Event | None:
        key = title.strip().lower()
        return next((e for e in self.sorted_events() if e.title.strip().lower() == key), None)

    def event_by_id(self, eid: int) -> Event | None:
        return next((e for e in self.events if e.eid == eid), None)

    def sorted_events(self) -> list[Event]:
        """Events in list order (by weekday, then time, then id)."""
        days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
        return sorted(
            self.events,
            key=lambda e: (days.index(e.day) if e.day in days else 7, e.time, e.eid),
        )

    def threads(self) -> list[tuple[str, list[Message]]]:
        """Message threads, most recently active first: ``[(peer, messages), ...]``."""
        last: dict[str, int] = {}
        for i, m in enumerate(self.messages):
            last[m.peer.lower()] = i
        order = sorted(last, key=lambda p: -last[p])
        out = []
        for p in order:
            msgs = [m for m in self.messages if m.peer.lower() == p]
            out.append((msgs[-1].peer, msgs))
        return out

    def sent_to(self, peer: str) -> list[str]:
        """Bodies of outgoing messages to ``peer`` (case-insensitive)."""
        key = peer.strip().lower()
        return [m.body for m in self.messages if m.outgoing and m.peer.strip().lower() == key]

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    # -------------------------------------------------------------- (de)serialise
    def copy(self) -> PhoneState:
        return PhoneState.from_dict(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready deep copy (hand-written: ``dataclasses.asdict`` is 10x slower per env step)."""
        ui = self.ui
        return {
            "contacts": [dict(c.__dict__) for c in self.contacts],
            "notes": [dict(n.__dict__) for n in self.notes],
            "events": [dict(e.__dict__) for e in self.events],
            "messages": [dict(m.__dict__) for m in self.messages],
            "settings": dict(self.settings),
            "answer": self.answer,
            "ui": {
                "app": ui.app,
                "screen": ui.screen,
                "params": dict(ui.params),
                "stack": [{**f, "params": dict(f.get("params", {}))} for f in ui.stack],
                "scroll": ui.scroll,
                "focus": ui.focus,
                "form": dict(ui.form),
                "dialog": dict(ui.dialog) if ui.dialog is not None else None,
                "loading": ui.loading,
                "recents": list(ui.recents),
            },
            "next_id": self.next_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PhoneState:
        """Inverse of :meth:`to_dict`; raises ``ValueError`` naming the bad key."""
        try:
            ui = dict(d.get("ui", {}))
            ui["params"] = dict(ui.get("params", {}))
            ui["stack"] = [{**f, "params": dict(f.get("params", {}))} for f in ui.get("stack", [])]
            ui["form"] = dict(ui.get("form", {}))
            ui["dialog"] = dict(ui["dialog"]) if ui.get("dialog") is not None else None
            ui["recents"] = list(ui.get("recents", []))
            return cls(
                contacts=[Contact(**c) for c in d.get("contacts", [])],
                notes=[Note(**n) for n in d.get("notes", [])],
                events=[Event(**e) for e in d.get("events", [])],
                messages=[Message(**m) for m in d.get("messages", [])],
                settings={**{k: False for k in SETTINGS}, **d.get("settings", {})},
                answer=d.get("answer"),
                ui=UIState(**ui),
                next_id=int(d.get("next_id", 1000)),
            )
        except TypeError as e:
            raise ValueError(f"bad PhoneState dict: {e}; expected the keys of PhoneState.to_dict()") from e

    def world_dict(self) -> dict[str, Any]:
        """The world half only (no UI, no answer): what tasks change."""
        d = self.to_dict()
        d.pop("ui")
        d.pop("answer")
        d.pop("next_id")
        return d
