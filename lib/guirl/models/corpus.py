"""Deterministic text corpus for training the tiny model's byte-level BPE tokenizer.

The corpus is generated in code (no download) from word lists and the action output formats
that GUI agents emit, so the tokenizer has merges for the strings the tiny model will read and
write in tests and CPU runs. Same code -> same corpus -> same tokenizer, on any machine.
"""

from __future__ import annotations

import hashlib
import random

# Words seen on phone screens (buttons, labels, settings entries).
UI_WORDS: tuple[str, ...] = (
    "Settings",
    "Wi-Fi",
    "Bluetooth",
    "Search",
    "OK",
    "Cancel",
    "Back",
    "Home",
    "Menu",
    "Save",
    "Delete",
    "Edit",
    "Share",
    "Send",
    "Open",
    "Close",
    "Next",
    "Previous",
    "Done",
    "Submit",
    "Login",
    "Sign in",
    "Sign up",
    "Password",
    "Username",
    "Email",
    "Message",
    "Messages",
    "Contacts",
    "Calendar",
    "Camera",
    "Gallery",
    "Photos",
    "Music",
    "Play",
    "Pause",
    "Stop",
    "Volume",
    "Brightness",
    "Notifications",
    "Battery",
    "Display",
    "Sound",
    "Alarm",
    "Clock",
    "Timer",
    "Stopwatch",
    "Weather",
    "Maps",
    "Browser",
    "Cart",
    "Checkout",
    "Add to cart",
    "Price",
    "Quantity",
    "Profile",
    "Account",
    "Logout",
    "Refresh",
    "Download",
    "Upload",
    "File",
    "Files",
    "Folder",
    "New",
    "Create",
    "Note",
    "Notes",
    "Title",
    "Description",
    "Date",
    "Time",
    "Today",
    "Tomorrow",
    "Yesterday",
    "Yes",
    "No",
    "Allow",
    "Deny",
    "Accept",
    "Skip",
    "Continue",
    "Filter",
    "Sort",
    "Favorites",
    "History",
    "Bookmark",
    "Tab",
    "Button",
    "Text",
    "Input",
    "Checkbox",
    "Switch",
    "Toggle",
    "Slider",
    "List",
    "Item",
    "Icon",
    "Image",
    "Dialog",
    "Popup",
    "Keyboard",
    "Language",
    "English",
    "Network",
    "Airplane mode",
    "Location",
    "Privacy",
    "Security",
    "Storage",
    "Apps",
    "About phone",
    "Update",
    "Install",
    "Uninstall",
    "Recent",
    "Dark mode",
    "Font size",
    "Wallpaper",
    "Ringtone",
    "Vibrate",
    "Silent",
    "Contact",
    "Call",
    "Reply",
    "Forward",
    "Archive",
    "Inbox",
    "Draft",
    "Sent",
    "Trash",
    "Compose",
    "Subject",
    "Attach",
    "Address",
    "Phone number",
    "First name",
    "Last name",
    "Birthday",
    "Event",
    "Reminder",
    "Repeat",
    "Every day",
    "Weekly",
    "Monthly",
    "Amount",
    "Category",
    "Expense",
    "Income",
    "Total",
    "Balance",
    "Recipe",
    "Ingredients",
    "Servings",
    "Track",
    "Album",
    "Artist",
    "Playlist",
    "Shuffle",
    "Lyrics",
    "Record",
    "Recording",
    "Video",
    "Photo",
    "Screenshot",
    "Zoom",
    "Crop",
    "Rotate",
    "Filters",
    "More options",
    "Navigate up",
    "Go to",
    "Directions",
    "Start",
    "Route",
    "Hotel",
    "Flight",
    "Check-in",
    "Check-out",
    "Guests",
    "Rooms",
    "Book now",
    "Reserve",
    "Confirm",
    "Payment",
    "Card",
    "Total price",
)

# Apps that appear in GUI-agent benchmarks (AndroidControl, AndroidWorld, GUI-Odyssey, AITW).
APP_NAMES: tuple[str, ...] = (
    "Chrome",
    "Gmail",
    "YouTube",
    "Google Maps",
    "WhatsApp",
    "Telegram",
    "Spotify",
    "Amazon",
    "Calculator",
    "Files",
    "Clock",
    "Contacts",
    "Messages",
    "Phone",
    "Camera",
    "Photos",
    "Play Store",
    "Calendar",
    "Keep Notes",
    "Drive",
    "Slack",
    "Zoom",
    "Twitter",
    "Instagram",
    "Facebook",
    "TikTok",
    "Uber",
    "Airbnb",
    "Booking",
    "Expedia",
    "eBay",
    "Walmart",
    "Reddit",
    "Wikipedia",
    "Firefox",
    "Outlook",
    "Netflix",
    "Audible",
    "Duolingo",
    "Simple Calendar Pro",
    "Markor",
    "Broccoli",
    "Pro Expense",
    "OsmAnd",
    "VLC",
    "Retro Music",
    "Joplin",
    "Tasks",
    "Simple SMS Messenger",
    "Audio Recorder",
    "Simple Gallery Pro",
    "Simple Draw Pro",
    "Settings",
    "Google",
    "Weather",
    "Shopping",
    "Translate",
    "News",
)

# Action names used by the output formats of the five papers and their baselines.
ACTION_NAMES: tuple[str, ...] = (
    "click",
    "long_press",
    "swipe",
    "scroll",
    "type",
    "input_text",
    "press_back",
    "press_home",
    "navigate_back",
    "navigate_home",
    "open_app",
    "wait",
    "terminate",
    "answer",
    "key",
    "system_button",
    "drag",
    "status",
    "finish",
    "enter",
)
DIRECTION_WORDS: tuple[str, ...] = ("up", "down", "left", "right")
AGENTCPM_PRESS: tuple[str, ...] = ("HOME", "BACK", "ENTER")
DO_ACTIONS: tuple[str, ...] = ("Tap", "Long Press", "Type", "Swipe", "Back", "Home", "Wait", "Launch")

SENTENCE_TEMPLATES: tuple[str, ...] = (
    "Open the {app} app and tap {word}.",
    "In {app}, go to {word} and then select {word2}.",
    "Task: {word} in {app}. Step {n} of {m}.",
    "The screen shows {word}, {word2} and a list of items.",
    "I need to click the {word} button to continue.",
    "Scroll {dir} to find {word2}, then long press it.",
    'Type "{word}" into the search box of {app}.',
    "Previous actions: click {word}; scroll {dir}; type {word2}.",
    "The {word} screen of {app} is open. The next step is {word2}.",
    "Set the alarm to {h}:{mm} and turn on {word}.",
)


def _coord(rng: random.Random, hi: int = 1000) -> int:
    return rng.randint(0, hi)


def _line(rng: random.Random) -> str:
    """One corpus line: a sentence, an action in one of the GUI-agent formats, or UI markup."""
    app, word, word2 = rng.choice(APP_NAMES), rng.choice(UI_WORDS), rng.choice(UI_WORDS)
    d = rng.choice(DIRECTION_WORDS)
    x, y = _coord(rng, 1080), _coord(rng, 2400)
    px, py = _coord(rng), _coord(rng)
    kind = rng.randrange(14)
    if kind == 0:
        return rng.choice(SENTENCE_TEMPLATES).format(
            app=app,
            word=word,
            word2=word2,
            dir=d,
            n=rng.randint(1, 9),
            m=rng.randint(2, 30),
            h=rng.randint(0, 23),
            mm=f"{rng.randint(0, 59):02d}",
        )
    if kind == 1:
        act = rng.choice(ACTION_NAMES)
        return f'<action>{{"action": "{act}", "coordinate": [{x}, {y}]}}</action>'
    if kind == 2:
        args = rng.choice(
            (
                f'"action": "click", "coordinate": [{x}, {y}]',
                f'"action": "swipe", "coordinate": [{x}, {y}], "coordinate2": [{px}, {py}]',
                f'"action": "type", "text": "{word}"',
                f'"action": "system_button", "button": "{rng.choice(("Back", "Home", "Enter"))}"',
                f'"action": "open", "text": "{app}"',
                f'"action": "terminate", "status": "{rng.choice(("success", "failure"))}"',
                f'"action": "long_press", "coordinate": [{x}, {y}], "time": 2',
            )
        )
        return f'<tool_call>\n{{"name": "mobile_use", "arguments": {{{args}}}}}\n</tool_call>'
    if kind == 3:
        return rng.choice(
            (
                f'{{"POINT":[{px},{py}]}}',
                f'{{"POINT":[{px},{py}],"to":"{d}"}}',
                f'{{"POINT":[{px},{py}],"duration":1000}}',
                f'{{"TYPE":"{word}"}}',
                f'{{"PRESS":"{rng.choice(AGENTCPM_PRESS)}"}}',
                '{"STATUS":"finish"}',
                f'{{"thought":"{word} is visible, tap it.","POINT":[{px},{py}]}}',
            )
        )
    if kind == 4:
        return f"<think>The task needs {word}. I see {word2} at the top.</think><answer>click({px}, {py})</answer>"
    if kind == 5:
        return f"<plan>1. Open {app}. 2. Tap {word}. 3. Check {word2}.</plan>"
    if kind == 6:
        act = rng.choice(DO_ACTIONS)
        if act in ("Tap", "Long Press"):
            return f'do(action="{act}", element=[{px},{py},{_coord(rng)},{_coord(rng)}])'
        if act == "Type":
            return f'do(action="Type", text="{word}")'
        if act == "Swipe":
            return (
                f'do(action="Swipe", element=[{px},{py},{_coord(rng)},{_coord(rng)}], direction="{d}", dist="medium")'
            )
        if act == "Launch":
            return f'do(action="Launch", app="{app}")'
        return f'do(action="{act}")' if act != "Wait" else 'do(action="Wait", duration="2 seconds")'
    if kind == 7:
        return f'finish(message="{word} done in {app}")'
    if kind == 8:
        x2, y2 = x + rng.randint(10, 400), y + rng.randint(10, 200)
        clickable = rng.choice(("true", "false"))
        return (
            f'<node index="{rng.randint(0, 40)}" text="{word}" resource-id="com.example:id/{word2.lower().replace(" ", "_")}" '
            f'class="android.widget.{rng.choice(("Button", "TextView", "EditText", "ImageView"))}" '
            f'clickable="{clickable}" bounds="[{x},{y}][{x2},{y2}]" />'
        )
    if kind == 9:
        return (
            f'{{"action_type": "{rng.choice(ACTION_NAMES)}", "x": {x}, "y": {y}, '
            f'"direction": "{d}", "text": "{word}", "app_name": "{app}"}}'
        )
    if kind == 10:
        return f"Step {rng.randint(1, 30)}: {rng.choice(ACTION_NAMES)}({px}, {py}) -> {word2}"
    if kind == 11:
        return " ".join(str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(rng.randint(3, 10)))
    if kind == 12:
        return f"[{px}, {py}, {_coord(rng)}, {_coord(rng)}] <ref>{word}</ref><box>({px},{py}),({_coord(rng)},{_coord(rng)})</box>"
    return f"User: {rng.choice(SENTENCE_TEMPLATES).format(app=app, word=word, word2=word2, dir=d, n=1, m=5, h=7, mm='30')}\nAssistant: {word2}"


def tokenizer_corpus(n_lines: int = 6000, seed: int = 20250101) -> list[str]:
    """Generate the tokenizer training corpus: ``n_lines`` strings, identical for identical args.

    The word lists are also included verbatim once (lower- and title-case) so every UI word and
    app name can become a single token. ``seed`` seeds a private :class:`random.Random`; the
    global RNG is untouched.
    """
    rng = random.Random(seed)
    words = sorted(set(UI_WORDS) | set(APP_NAMES) | set(ACTION_NAMES))
    lines = [" ".join(words), " ".join(w.lower() for w in words)]
    lines += [_line(rng) for _ in range(n_lines)]
    return lines


def corpus_sha256(lines: list[str]) -> str:
    """Hex SHA-256 of the corpus (lines joined by newlines); part of the tiny model's cache key."""
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
