"""MiniGUI task generator: seeded worlds, task templates with checkable subgoals.

A :class:`Task` carries its initial world (built from the seed: names, phones, cities, notes,
events and messages drawn from small word lists), a high-level instruction, and subgoals
``[(description, predicate(PhoneState) -> bool), ...]``. ``task.check(state)`` is True when every
subgoal holds: success is a property of the final app state, never of the action sequence.

Categories follow the papers' task families (AndroidLong / AgentCPM-GUI / GUI-Odyssey style):
``item_creation``, ``item_edition``, ``information_query`` (an ``answer`` action with the right
text), ``compound``, ``cross_app``, ``long_loop`` ("for each of the first 4 contacts, if ...").
Each template has an id (``"contacts.add"``) so that splits can hold out whole templates.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from guirl.env.state import (
    APP_TITLES,
    SETTING_LABELS,
    SETTINGS,
    Contact,
    Event,
    Message,
    Note,
    PhoneState,
)
from guirl.matching import TEXT_RULES, text_match

Predicate = Callable[[PhoneState], bool]
Subgoal = tuple[str, Predicate]

CATEGORIES: tuple[str, ...] = (
    "item_creation",
    "item_edition",
    "information_query",
    "compound",
    "cross_app",
    "long_loop",
)
FIRST_NAMES: tuple[str, ...] = (
    "Ann",
    "Bob",
    "Carl",
    "Dana",
    "Eve",
    "Finn",
    "Gina",
    "Hugo",
    "Iris",
    "Jack",
    "Kira",
    "Leo",
    "Mia",
    "Nora",
    "Omar",
    "Pia",
    "Quinn",
    "Rosa",
    "Sam",
    "Tara",
    "Uma",
    "Vik",
    "Wendy",
    "Yara",
    "Zoe",
)
CITIES: tuple[str, ...] = ("Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Rome", "Delhi", "Quito")
NOTE_TITLES: tuple[str, ...] = (
    "Buy milk",
    "Call mom",
    "Pay rent",
    "Book flight",
    "Water plants",
    "Gym class",
    "Read book",
    "Fix bike",
    "Clean desk",
    "Send report",
    "Buy bread",
    "Walk dog",
    "Plan trip",
    "Buy stamps",
)
EVENT_TITLES: tuple[str, ...] = (
    "Dentist",
    "Team sync",
    "Lunch",
    "Yoga",
    "Haircut",
    "Interview",
    "Dinner",
    "Piano lesson",
    "Soccer",
    "Doctor",
    "Book club",
    "Car service",
)
BODIES: tuple[str, ...] = (
    "See you at 5",
    "Running late",
    "Call me back",
    "Happy birthday",
    "Lunch tomorrow",
    "Got the tickets",
    "On my way",
    "Thanks a lot",
    "Meet at the cafe",
    "Nice work today",
    "Bring the keys",
    "Movie tonight",
)
DAY_NAMES: tuple[str, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
TIMES: tuple[str, ...] = tuple(f"{h:02d}:{m:02d}" for h in range(8, 21) for m in (0, 30))


# ============================================================== world
def _phone(rng: random.Random, used: set[str]) -> str:
    while True:
        p = f"555-{rng.randint(1000, 9999)}"
        if p not in used:
            used.add(p)
            return p


def random_world(rng: random.Random) -> PhoneState:
    """A random initial world: 8-12 contacts, 3-6 notes, 3-6 events, 5-9 messages, random settings."""
    st = PhoneState()
    n = rng.randint(8, 12)
    used: set[str] = set()
    for i, name in enumerate(rng.sample(FIRST_NAMES, n)):
        st.contacts.append(
            Contact(
                cid=i + 1, name=name, phone=_phone(rng, used), city=rng.choice(CITIES), favorite=rng.random() < 0.25
            )
        )
    for i, t in enumerate(rng.sample(NOTE_TITLES, rng.randint(3, 6))):
        st.notes.append(Note(nid=101 + i, title=t, done=rng.random() < 0.3))
    for i, t in enumerate(rng.sample(EVENT_TITLES, rng.randint(3, 6))):
        st.events.append(Event(eid=201 + i, title=t, day=rng.choice(DAY_NAMES), time=rng.choice(TIMES)))
    peers = rng.sample([c.name for c in st.contacts], rng.randint(3, 5))
    for p in peers:  # every thread has at least one received message
        st.messages.append(Message(peer=p, body=rng.choice(BODIES), outgoing=False))
    for _ in range(rng.randint(2, 4)):
        st.messages.append(Message(peer=rng.choice(peers), body=rng.choice(BODIES), outgoing=rng.random() < 0.4))
    rng.shuffle(st.messages)
    st.settings = {k: rng.random() < 0.5 for k in SETTINGS}
    return st


# ============================================================== answers
def text_matches(answer: str | None, expected: str) -> bool:
    """True when ``expected``'s words appear contiguously in ``answer`` (lower-cased, punctuation-free):
    the named text rule ``"minigui_answer"`` of :data:`guirl.matching.TEXT_RULES`.

    "555-1234" matches "Ann's number is 555-1234"; "on" does not match "Location is off".
    """
    return text_match(answer, expected, TEXT_RULES["minigui_answer"])


# ============================================================== task
@dataclass
class Task:
    """One generated task. ``initial_state`` is a :meth:`PhoneState.to_dict` dict."""

    task_id: str
    template_id: str
    category: str
    apps: tuple[str, ...]
    instruction: str
    params: dict[str, Any]
    initial_state: dict[str, Any]
    subgoals: list[Subgoal] = field(default_factory=list)
    answer: str | None = None  # expected answer text (information queries)

    def check(self, state: PhoneState) -> bool:
        """Task success on ``state``: every subgoal predicate holds."""
        return all(pred(state) for _, pred in self.subgoals)

    def subgoal_status(self, state: PhoneState) -> list[bool]:
        return [bool(pred(state)) for _, pred in self.subgoals]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (predicates are rebuilt from template id + params by :meth:`from_dict`)."""
        return {
            "task_id": self.task_id,
            "template_id": self.template_id,
            "category": self.category,
            "apps": list(self.apps),
            "instruction": self.instruction,
            "params": self.params,
            "initial_state": self.initial_state,
            "answer": self.answer,
            "subgoals": [d for d, _ in self.subgoals],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        tid = d.get("template_id")
        if tid not in TEMPLATES:
            raise ValueError(f"task {d.get('task_id')!r}: unknown template_id {tid!r}; known: {sorted(TEMPLATES)}")
        return make_task(tid, d["params"], PhoneState.from_dict(d["initial_state"]), d["task_id"])


@dataclass(frozen=True)
class Template:
    template_id: str
    category: str
    apps: tuple[str, ...]
    sample: Callable[[random.Random, PhoneState], dict[str, Any] | None]  # None: not applicable to this world
    build: Callable[[dict[str, Any], PhoneState], tuple[str, list[Subgoal], str | None]]


TEMPLATES: dict[str, Template] = {}


def _register(tid: str, category: str, apps: Sequence[str]):
    def deco(fns: tuple[Callable, Callable]) -> tuple[Callable, Callable]:
        TEMPLATES[tid] = Template(tid, category, tuple(apps), fns[0], fns[1])
        return fns

    return deco


def make_task(template_id: str, params: dict[str, Any], world: PhoneState, task_id: str) -> Task:
    """Build a task from a template, its params and the initial world."""
    t = TEMPLATES[template_id]
    instr, subgoals, answer = t.build(params, world)
    return Task(task_id, template_id, t.category, t.apps, instr, dict(params), world.to_dict(), subgoals, answer)


# -------------------------------------------------------------- predicates
def _contact_is(name: str, **fields: Any) -> Predicate:
    def p(s: PhoneState) -> bool:
        c = s.contact_by_name(name)
        return c is not None and all(getattr(c, k) == v for k, v in fields.items())

    return p


def _cid_is(cid: int, **fields: Any) -> Predicate:
    def p(s: PhoneState) -> bool:
        c = s.contact_by_id(cid)
        return c is not None and all(getattr(c, k) == v for k, v in fields.items())

    return p


def _n_sent(s: PhoneState, peer: str, text: str) -> int:
    return sum(text_matches(b, text) for b in s.sent_to(peer))


def _sent(peer: str, text: str, w: PhoneState) -> Predicate:
    """More messages to ``peer`` containing ``text`` than in the initial world ``w``."""
    before = _n_sent(w, peer, text)
    return lambda s: _n_sent(s, peer, text) > before


def _answered(expected: str) -> Predicate:
    return lambda s: text_matches(s.answer, expected)


def _new_name(rng: random.Random, w: PhoneState) -> str:
    have = {c.name for c in w.contacts}
    return rng.choice([n for n in FIRST_NAMES if n not in have])


def _pick(rng: random.Random, xs: Sequence[Any], k: int = 1) -> Any:
    return rng.choice(list(xs)) if k == 1 else rng.sample(list(xs), k)


def _v(p: dict[str, Any], options: Sequence[str]) -> str:
    """Instruction paraphrase ``p['v']`` of ``options``."""
    return options[p.get("v", 0) % len(options)]


# -------------------------------------------------------------- item_creation
_register("contacts.add", "item_creation", ["contacts"])(
    (
        lambda r, w: {
            "name": _new_name(r, w),
            "phone": _phone(r, {c.phone for c in w.contacts}),
            "city": r.choice(CITIES),
            "v": r.randrange(3),
        },
        lambda p, w: (
            _v(
                p,
                [
                    "Add a new contact named {name} with phone {phone} and city {city}.",
                    "Create a contact: {name}, phone {phone}, lives in {city}.",
                    "Save {name} ({phone}, {city}) as a new contact.",
                ],
            ).format(**p),
            [
                (f"Contact {p['name']} exists", _contact_is(p["name"])),
                (f"{p['name']}'s phone is {p['phone']}", _contact_is(p["name"], phone=p["phone"])),
                (f"{p['name']}'s city is {p['city']}", _contact_is(p["name"], city=p["city"])),
            ],
            None,
        ),
    )
)
_register("calendar.add", "item_creation", ["calendar"])(
    (
        lambda r, w: {
            "title": r.choice([t for t in EVENT_TITLES if w.event_by_title(t) is None]),
            "day": r.choice(DAY_NAMES),
            "time": r.choice(TIMES),
            "v": r.randrange(2),
        },
        lambda p, w: (
            _v(
                p,
                [
                    "Add a calendar event '{title}' on {day} at {time}.",
                    "Schedule '{title}' for {day} at {time} in the calendar.",
                ],
            ).format(**p),
            [
                (f"Event {p['title']} exists", lambda s: s.event_by_title(p["title"]) is not None),
                (
                    f"{p['title']} is on {p['day']} at {p['time']}",
                    lambda s: (
                        (e := s.event_by_title(p["title"])) is not None and (e.day, e.time) == (p["day"], p["time"])
                    ),
                ),
            ],
            None,
        ),
    )
)
_register("notes.add", "item_creation", ["notes"])(
    (
        lambda r, w: {"title": r.choice([t for t in NOTE_TITLES if w.note_by_title(t) is None]), "v": r.randrange(2)},
        lambda p, w: (
            _v(p, ["Create a note titled '{title}'.", "Add a new note: {title}."]).format(**p),
            [(f"Note {p['title']} exists", lambda s: s.note_by_title(p["title"]) is not None)],
            None,
        ),
    )
)
_register("messages.send", "item_creation", ["messages"])(
    (
        lambda r, w: {"peer": r.choice(w.contacts).name, "body": r.choice(BODIES), "v": r.randrange(2)},
        lambda p, w: (
            _v(p, ["Send a message saying '{body}' to {peer}.", "Text {peer}: '{body}'."]).format(**p),
            [(f"Message '{p['body']}' sent to {p['peer']}", _sent(p["peer"], p["body"], w))],
            None,
        ),
    )
)


# -------------------------------------------------------------- item_edition
def _edit_phone_sample(r: random.Random, w: PhoneState) -> dict[str, Any]:
    c = r.choice(w.contacts)
    return {"cid": c.cid, "name": c.name, "phone": _phone(r, {x.phone for x in w.contacts}), "v": r.randrange(2)}


_register("contacts.edit_phone", "item_edition", ["contacts"])(
    (
        _edit_phone_sample,
        lambda p, w: (
            _v(p, ["Change {name}'s phone number to {phone}.", "Update the phone of {name} to {phone}."]).format(**p),
            [(f"{p['name']}'s phone is {p['phone']}", _cid_is(p["cid"], phone=p["phone"], name=p["name"]))],
            None,
        ),
    )
)
_register("contacts.favorite", "item_edition", ["contacts"])(
    (
        lambda r, w: (lambda cs: {"cid": (c := r.choice(cs)).cid, "name": c.name, "v": r.randrange(2)} if cs else None)(
            [c for c in w.contacts if not c.favorite]
        ),
        lambda p, w: (
            _v(p, ["Add {name} to favorites.", "Mark the contact {name} as a favorite."]).format(**p),
            [(f"{p['name']} is a favorite", _cid_is(p["cid"], favorite=True))],
            None,
        ),
    )
)
_register("contacts.delete", "item_edition", ["contacts"])(
    (
        lambda r, w: (lambda c: {"cid": c.cid, "name": c.name, "v": r.randrange(2)})(r.choice(w.contacts)),
        lambda p, w: (
            _v(p, ["Delete the contact {name}.", "Remove {name} from my contacts."]).format(**p),
            [
                (f"{p['name']} is deleted", lambda s: s.contact_by_id(p["cid"]) is None),
                ("Other contacts are kept", lambda s: len(s.contacts) == len(w.contacts) - 1),
            ],
            None,
        ),
    )
)
_register("notes.toggle", "item_edition", ["notes"])(
    (
        lambda r, w: (lambda n: {"nid": n.nid, "title": n.title, "done": not n.done})(r.choice(w.notes)),
        lambda p, w: (
            f"Mark the note '{p['title']}' as {'done' if p['done'] else 'not done'}.",
            [
                (
                    f"{p['title']} is {'done' if p['done'] else 'not done'}",
                    lambda s: (n := s.note_by_id(p["nid"])) is not None and n.done == p["done"],
                )
            ],
            None,
        ),
    )
)
_register("notes.rename", "item_edition", ["notes"])(
    (
        lambda r, w: (
            lambda n: {
                "nid": n.nid,
                "old": n.title,
                "title": r.choice([t for t in NOTE_TITLES if w.note_by_title(t) is None]),
            }
        )(r.choice(w.notes)),
        lambda p, w: (
            f"Rename the note '{p['old']}' to '{p['title']}'.",
            [
                (
                    f"Note renamed to {p['title']}",
                    lambda s: (n := s.note_by_id(p["nid"])) is not None and n.title == p["title"],
                )
            ],
            None,
        ),
    )
)
_register("settings.toggle", "item_edition", ["settings"])(
    (
        lambda r, w: (lambda k: {"key": k, "on": not w.settings[k], "v": r.randrange(2)})(r.choice(SETTINGS)),
        lambda p, w: (
            _v(p, ["Turn {onoff} {label}.", "Switch {label} {onoff} in Settings."]).format(
                onoff="on" if p["on"] else "off", label=SETTING_LABELS[p["key"]]
            ),
            [
                (
                    f"{SETTING_LABELS[p['key']]} is {'on' if p['on'] else 'off'}",
                    lambda s: s.settings[p["key"]] == p["on"],
                )
            ],
            None,
        ),
    )
)
_register("calendar.edit_time", "item_edition", ["calendar"])(
    (
        lambda r, w: (lambda e: {"eid": e.eid, "title": e.title, "time": r.choice([t for t in TIMES if t != e.time])})(
            r.choice(w.events)
        ),
        lambda p, w: (
            f"Move the event '{p['title']}' to {p['time']}.",
            [
                (
                    f"{p['title']} is at {p['time']}",
                    lambda s: (e := s.event_by_id(p["eid"])) is not None and e.time == p["time"],
                )
            ],
            None,
        ),
    )
)


# -------------------------------------------------------------- information_query
def _query(expected: str, what: str) -> tuple[list[Subgoal], str]:
    return [(f"Answered {what}: {expected}", _answered(expected))], expected


def _q_contact(r: random.Random, w: PhoneState) -> dict[str, Any]:
    c = r.choice(w.contacts)
    return {"cid": c.cid, "name": c.name, "v": r.randrange(2)}


def _last_in(w: PhoneState, peer: str) -> str:
    return [m.body for m in w.messages if m.peer == peer and not m.outgoing][-1]


_register("contacts.query_phone", "information_query", ["contacts"])(
    (
        _q_contact,
        lambda p, w: (
            _v(p, ["What is {name}'s phone number?", "Find the phone number of {name}."]).format(**p),
            *_query(w.contact_by_id(p["cid"]).phone, f"{p['name']}'s phone"),  # type: ignore[union-attr]
        ),
    )
)
_register("contacts.query_city", "information_query", ["contacts"])(
    (
        _q_contact,
        lambda p, w: (
            _v(p, ["Which city does {name} live in?", "Look up {name}'s city."]).format(**p),
            *_query(w.contact_by_id(p["cid"]).city, f"{p['name']}'s city"),  # type: ignore[union-attr]
        ),
    )
)
_register("calendar.query_time", "information_query", ["calendar"])(
    (
        lambda r, w: {"eid": (e := r.choice(w.events)).eid, "title": e.title},
        lambda p, w: (
            f"At what time is '{p['title']}'?",
            *_query(w.event_by_id(p["eid"]).time, f"time of {p['title']}"),  # type: ignore[union-attr]
        ),
    )
)
_register("messages.query_last", "information_query", ["messages"])(
    (
        lambda r, w: {"peer": r.choice(sorted({m.peer for m in w.messages if not m.outgoing}))},
        lambda p, w: (
            f"What did {p['peer']} last text me?",
            *_query(_last_in(w, p["peer"]), f"{p['peer']}'s last message"),
        ),
    )
)
_register("settings.query", "information_query", ["settings"])(
    (
        lambda r, w: {"key": r.choice(SETTINGS)},
        lambda p, w: (
            f"Is {SETTING_LABELS[p['key']]} on or off?",
            *_query("on" if w.settings[p["key"]] else "off", SETTING_LABELS[p["key"]]),
        ),
    )
)
_register("notes.query_count", "information_query", ["notes"])(
    (
        lambda r, w: {},
        lambda p, w: (
            "How many notes are not done yet?",
            *_query(str(sum(not n.done for n in w.notes)), "number of open notes"),
        ),
    )
)


# -------------------------------------------------------------- compound
_register("settings.two_toggles", "compound", ["settings"])(
    (
        lambda r, w: (lambda ks: {"keys": ks, "on": [not w.settings[k] for k in ks]})(r.sample(SETTINGS, 2)),
        lambda p, w: (
            "Turn {} {} and turn {} {}.".format(
                "on" if p["on"][0] else "off",
                SETTING_LABELS[p["keys"][0]],
                "on" if p["on"][1] else "off",
                SETTING_LABELS[p["keys"][1]],
            ),
            [
                (f"{SETTING_LABELS[k]} is {'on' if on else 'off'}", (lambda s, k=k, on=on: s.settings[k] == on))
                for k, on in zip(p["keys"], p["on"])
            ],
            None,
        ),
    )
)
_register("contacts.add_favorite", "compound", ["contacts"])(
    (
        lambda r, w: {"name": _new_name(r, w), "phone": _phone(r, {c.phone for c in w.contacts}), "v": r.randrange(2)},
        lambda p, w: (
            _v(
                p,
                [
                    "Add a contact {name} with phone {phone}, then mark them as a favorite.",
                    "Create the contact {name} ({phone}) and add them to favorites.",
                ],
            ).format(**p),
            [
                (f"Contact {p['name']} with phone {p['phone']} exists", _contact_is(p["name"], phone=p["phone"])),
                (f"{p['name']} is a favorite", _contact_is(p["name"], favorite=True)),
            ],
            None,
        ),
    )
)
_register("notes.add_done", "compound", ["notes"])(
    (
        lambda r, w: {"title": r.choice([t for t in NOTE_TITLES if w.note_by_title(t) is None])},
        lambda p, w: (
            f"Create a note '{p['title']}' and mark it as done.",
            [
                (f"Note {p['title']} exists", lambda s: s.note_by_title(p["title"]) is not None),
                (f"{p['title']} is done", lambda s: (n := s.note_by_title(p["title"])) is not None and n.done),
            ],
            None,
        ),
    )
)


# -------------------------------------------------------------- cross_app
def _two_contacts(r: random.Random, w: PhoneState) -> dict[str, Any]:
    a, b = r.sample(w.contacts, 2)
    return {"a": a.name, "acid": a.cid, "b": b.name}


_register("cross.share_phone", "cross_app", ["contacts", "messages"])(
    (
        _two_contacts,
        lambda p, w: (
            f"Look up {p['a']}'s phone number and send it to {p['b']} in Messages.",
            [(f"{p['a']}'s number sent to {p['b']}", _sent(p["b"], w.contact_by_id(p["acid"]).phone, w))],  # type: ignore[union-attr]
            None,
        ),
    )
)
_register("cross.note_phone", "cross_app", ["contacts", "notes"])(
    (
        lambda r, w: {"a": (c := r.choice(w.contacts)).name, "acid": c.cid},
        lambda p, w: (
            f"Create a note whose title is {p['a']}'s phone number.",
            [
                (
                    f"Note with {p['a']}'s number exists",
                    lambda s: s.note_by_title(w.contact_by_id(p["acid"]).phone) is not None,
                )
            ],
            None,
        ),  # type: ignore[union-attr]
    )
)
_register("cross.event_to_msg", "cross_app", ["calendar", "messages"])(
    (
        lambda r, w: {"eid": (e := r.choice(w.events)).eid, "title": e.title, "b": r.choice(w.contacts).name},
        lambda p, w: (
            f"Text {p['b']} the time of the '{p['title']}' event.",
            [(f"Time of {p['title']} sent to {p['b']}", _sent(p["b"], w.event_by_id(p["eid"]).time, w))],  # type: ignore[union-attr]
            None,
        ),
    )
)


# -------------------------------------------------------------- long_loop
def _loop_city(r: random.Random, w: PhoneState) -> dict[str, Any]:
    first = w.sorted_contacts()[:4]
    return {"city": r.choice([c.city for c in first]), "body": r.choice(BODIES)}


def _fav_city_build(p: dict[str, Any], w: PhoneState) -> tuple[str, list[Subgoal], None]:
    first = w.sorted_contacts()[:4]
    goals: list[Subgoal] = []
    for c in first:
        if c.city == p["city"]:
            goals.append((f"{c.name} is a favorite", _cid_is(c.cid, favorite=True)))
        else:
            goals.append((f"{c.name} is unchanged", _cid_is(c.cid, favorite=c.favorite)))
    return (f"For each of the first 4 contacts, if their city is {p['city']}, add them to favorites.", goals, None)


def _msg_city_build(p: dict[str, Any], w: PhoneState) -> tuple[str, list[Subgoal], None]:
    first = w.sorted_contacts()[:4]
    body = p["body"]
    goals: list[Subgoal] = [
        (f"'{body}' sent to {c.name}", _sent(c.name, body, w)) for c in first if c.city == p["city"]
    ]
    init = {c.name: _n_sent(w, c.name, body) for c in first if c.city != p["city"]}
    goals.append(("Nobody else got the message", lambda s: all(_n_sent(s, n, body) == k for n, k in init.items())))
    return (f"For each of the first 4 contacts, if they live in {p['city']}, send them '{body}'.", goals, None)


def _fav_city_sample(r: random.Random, w: PhoneState) -> dict[str, Any] | None:
    cities = [c.city for c in w.sorted_contacts()[:4] if not c.favorite]
    return {"city": r.choice(cities)} if cities else None  # None: already done in this world


_register("loop.fav_city", "long_loop", ["contacts"])((_fav_city_sample, _fav_city_build))
_register("loop.msg_city", "long_loop", ["contacts", "messages"])((_loop_city, _msg_city_build))
_register("loop.notes_done", "long_loop", ["notes"])(
    (
        lambda r, w: {} if any(not n.done for n in w.notes) else None,
        lambda p, w: (
            "Go through my notes and mark every unfinished one as done.",
            [
                (f"{n.title} is done", (lambda s, nid=n.nid: (x := s.note_by_id(nid)) is not None and x.done))
                for n in w.notes
                if not n.done
            ],
            None,
        ),
    )
)

#: Defaults for the held-out splits: one template per category (never touching the held-out app).
DEFAULT_HELDOUT_APP = "notes"
DEFAULT_UNSEEN_TEMPLATES: tuple[str, ...] = (
    "messages.send",
    "calendar.edit_time",
    "contacts.query_city",
    "contacts.add_favorite",
    "cross.event_to_msg",
    "loop.msg_city",
)


def templates_for(
    categories: Iterable[str] | None = None,
    apps: Iterable[str] | None = None,
    exclude_apps: Iterable[str] = (),
    template_ids: Iterable[str] | None = None,
    exclude_templates: Iterable[str] = (),
) -> list[str]:
    """Template ids filtered by category / app (a template matches ``apps`` when all its apps are in it)."""
    cats = set(categories) if categories is not None else set(CATEGORIES)
    bad = cats - set(CATEGORIES)
    if bad:
        raise ValueError(f"unknown categories {sorted(bad)}; known: {CATEGORIES}")
    allowed = set(apps) if apps is not None else None
    ex_apps, ex_t = set(exclude_apps), set(exclude_templates)
    ids = set(template_ids) if template_ids is not None else None
    if ids is not None and ids - set(TEMPLATES):
        raise ValueError(f"unknown template ids {sorted(ids - set(TEMPLATES))}; known: {sorted(TEMPLATES)}")
    out = []
    for tid, t in TEMPLATES.items():
        if t.category not in cats or tid in ex_t or (ids is not None and tid not in ids):
            continue
        if (allowed is not None and not set(t.apps) <= allowed) or set(t.apps) & ex_apps:
            continue
        out.append(tid)
    return out


def generate_tasks(
    n: int,
    seed: int,
    categories: Iterable[str] | None = None,
    apps: Iterable[str] | None = None,
    exclude_apps: Iterable[str] = (),
    template_ids: Iterable[str] | None = None,
    exclude_templates: Iterable[str] = (),
    prefix: str = "mg",
) -> list[Task]:
    """``n`` tasks, deterministic in ``seed``; categories take turns (balanced), templates cycle within each.

    Each task gets its own world drawn from ``Random(f"{prefix}-{seed}-{attempt}")``. ``task_id`` is
    ``f"{prefix}-{seed}-{i:05d}"``.
    """
    ids = templates_for(categories, apps, exclude_apps, template_ids, exclude_templates)
    if not ids:
        raise ValueError("no task template matches the given categories/apps filters")
    order = random.Random(seed)
    by_cat: dict[str, list[str]] = {}
    for tid in ids:
        by_cat.setdefault(TEMPLATES[tid].category, []).append(tid)
    cats = [c for c in CATEGORIES if c in by_cat]
    order.shuffle(cats)
    for c in cats:
        order.shuffle(by_cat[c])
    tasks: list[Task] = []
    attempts = 0
    while len(tasks) < n:
        if attempts > 50 * (n + 10):
            raise RuntimeError(f"could not sample {n} tasks from templates {ids}")
        cat = cats[attempts % len(cats)]
        pool = by_cat[cat]
        tid = pool[(attempts // len(cats)) % len(pool)]
        rng = random.Random(f"{prefix}-{seed}-{attempts}")
        attempts += 1
        world = random_world(rng)
        params = TEMPLATES[tid].sample(rng, world)
        if params is None:
            continue
        tasks.append(make_task(tid, params, world, f"{prefix}-{seed}-{len(tasks):05d}"))
    return tasks


__all__ = [
    "APP_TITLES",
    "CATEGORIES",
    "DEFAULT_HELDOUT_APP",
    "DEFAULT_UNSEEN_TEMPLATES",
    "TEMPLATES",
    "Task",
    "Template",
    "generate_tasks",
    "make_task",
    "random_world",
    "templates_for",
    "text_matches",
]
