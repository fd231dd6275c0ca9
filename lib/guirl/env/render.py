"""Draw a MiniGUI :class:`~guirl.env.apps.Screen` with PIL at any resolution.

Design for a tiny vision model: each role has its own shape and colour (solid coloured
buttons with bold white labels, outlined white inputs, pill toggles, square checkboxes,
round avatars with an initial, an app-coloured title bar), text is large (about 3.3 % of
the screen height) and drawn bold by double-striking, and positions come from the fixed
normalised grid of :mod:`guirl.env.apps`. Uses PIL's built-in scalable font
(``ImageFont.load_default(size=...)``, pillow >= 10.1), so no font file is shipped.

Units: boxes are normalised ``(x1, y1, x2, y2)``; ``width``/``height`` are pixels.
Rendering is deterministic: the same screen and size give the same pixels.
:func:`render_screen_spans` also returns every string as it was drawn (after truncation to fit)
with its pixel box: the ground truth of what a reader of the screenshot can see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from guirl.env.apps import Screen, Widget

RGB = tuple[int, int, int]
APP_COLORS: dict[str, RGB] = {
    "contacts": (33, 110, 220),
    "messages": (30, 160, 90),
    "notes": (235, 160, 10),
    "settings": (90, 100, 120),
    "calendar": (215, 55, 55),
    "recents": (120, 80, 200),
    "launcher": (60, 60, 60),
}
ICON_GLYPHS: dict[str, str] = {"contacts": "C", "messages": "M", "notes": "N", "settings": "S", "calendar": "31"}
BUTTON_COLORS: dict[str, RGB] = {
    "blue": (33, 110, 220),
    "green": (30, 150, 70),
    "red": (205, 45, 45),
    "amber": (225, 150, 0),
    "gray": (120, 120, 120),
}
AVATAR_COLORS: tuple[RGB, ...] = (
    (230, 90, 60),
    (60, 140, 220),
    (60, 170, 100),
    (170, 90, 200),
    (220, 160, 30),
    (40, 160, 170),
)
BG: RGB = (255, 255, 255)
LAUNCHER_BG: RGB = (226, 236, 248)
TEXT: RGB = (25, 25, 25)
MUTED: RGB = (110, 110, 110)
ROW_BG: RGB = (242, 244, 248)
ROW_LINE: RGB = (200, 205, 215)
NAV_BG: RGB = (30, 30, 30)
NAV_Y = 0.92


@dataclass(frozen=True)
class TextSpan:
    """One string as drawn on a screenshot.

    ``text``: the drawn characters (a string that did not fit ends in ``"..."``); ``box``: its
    ink box in pixels ``(x1, y1, x2, y2)`` of the rendered image (PIL's ``textbbox``, widened by
    the bold stroke); ``element_id`` / ``role``: the widget that drew it; ``kind``: ``"label"``
    (the widget's label), ``"value"`` (its secondary text: a phone under a name, an input's
    content), ``"placeholder"`` (an empty input's hint), ``"glyph"`` (an app icon's letter) or
    ``"initial"`` (an avatar's letter); ``truncated``: whether the widget's string was cut to fit.
    """

    text: str
    box: tuple[int, int, int, int]
    element_id: str
    role: str
    kind: str
    truncated: bool = False


@lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """PIL's built-in scalable font at ``size`` px (cached)."""
    return ImageFont.load_default(size=max(6, int(size)))


class _Painter:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        base = min(height * 0.034, width * 0.06)
        self.big = max(8, round(base))
        self.small = max(7, round(base * 0.78))
        self.huge = max(10, round(base * 1.9))
        self.bold_dx = max(1, round(base / 16))
        self.spans: list[TextSpan] | None = None  # filled by render_screen_spans
        self.widget: Widget | None = None  # the widget being drawn (its spans name it)

    def px(self, box: Sequence[float]) -> tuple[int, int, int, int]:
        return (round(box[0] * self.w), round(box[1] * self.h), round(box[2] * self.w), round(box[3] * self.h))

    def fit(self, d: ImageDraw.ImageDraw, text: str, size: int, max_w: float) -> str:
        f = font(size)
        if d.textlength(text, font=f) <= max_w:
            return text
        while text and d.textlength(text + "...", font=f) > max_w:
            text = text[:-1]
        return text + "..."

    def text(
        self,
        d: ImageDraw.ImageDraw,
        xy: tuple[float, float],
        text: str,
        size: int,
        fill: RGB,
        bold: bool = False,
        anchor: str = "lm",
        max_w: float | None = None,
        kind: str = "label",
    ) -> None:
        full = text
        if max_w is not None:
            text = self.fit(d, text, size, max_w)
        f = font(size)
        d.text(xy, text, font=f, fill=fill, anchor=anchor)
        if bold:
            d.text((xy[0] + self.bold_dx, xy[1]), text, font=f, fill=fill, anchor=anchor)
        if self.spans is not None and self.widget is not None and text:
            x1, y1, x2, y2 = d.textbbox(xy, text, font=f, anchor=anchor)
            box = (int(x1), int(y1), int(x2 + (self.bold_dx if bold else 0)), int(y2))
            w = self.widget
            self.spans.append(TextSpan(text, box, w.element_id, w.role, kind, truncated=text != full))


def _star(d: ImageDraw.ImageDraw, cx: float, cy: float, r: float, fill: RGB) -> None:
    import math

    pts = []
    for k in range(10):
        rr = r if k % 2 == 0 else r * 0.45
        a = -math.pi / 2 + k * math.pi / 5
        pts.append((cx + rr * math.cos(a), cy + rr * math.sin(a)))
    d.polygon(pts, fill=fill)


def _draw(p: _Painter, d: ImageDraw.ImageDraw, w: Widget) -> None:
    x1, y1, x2, y2 = p.px(w.box)
    bw, bh = x2 - x1, y2 - y1
    cy = (y1 + y2) / 2
    rad = max(2, round(bh * 0.2))
    r = w.role
    if r == "title":
        d.rectangle((x1, y1, x2, y2), fill=APP_COLORS.get(w.style.get("app", ""), (60, 60, 60)))
        p.text(d, (x1 + 0.05 * p.w, cy), w.label, p.big + 2, (255, 255, 255), bold=True, max_w=0.9 * p.w)
    elif r == "icon":
        col = APP_COLORS.get(w.style.get("app", ""), (90, 90, 90))
        ih = round(0.11 * p.h)
        iw = min(bw - 2 * round(0.02 * p.w), ih)
        ix = (x1 + x2) / 2 - iw / 2
        d.rounded_rectangle((ix, y1, ix + iw, y1 + ih), radius=max(3, iw // 5), fill=col)
        glyph = ICON_GLYPHS.get(w.style.get("app", ""), w.label[:1])
        p.text(
            d,
            ((x1 + x2) / 2, y1 + ih / 2),
            glyph,
            p.huge if len(glyph) == 1 else round(p.huge * 0.8),
            (255, 255, 255),
            bold=True,
            anchor="mm",
            kind="glyph",
        )
        p.text(
            d, ((x1 + x2) / 2, y1 + ih + (y2 - y1 - ih) / 2), w.label, p.small, TEXT, bold=True, anchor="mm", max_w=bw
        )
    elif r in ("list_item", "card", "menu_item"):
        d.rounded_rectangle((x1, y1, x2, y2), radius=rad, fill=ROW_BG, outline=ROW_LINE)
        tx = x1 + 0.04 * p.w
        if r == "card":
            col = APP_COLORS.get(w.style.get("app", ""), (90, 90, 90))
            d.rounded_rectangle((x1, y1, x1 + 0.05 * p.w, y2), radius=rad, fill=col)
            tx = x1 + 0.09 * p.w
        elif r == "list_item" and w.style.get("avatar", True) is not False:
            rr = bh * 0.32
            acx = x1 + 0.03 * p.w + rr
            if w.style.get("avatar") == "cal":
                d.rectangle((acx - rr, cy - rr, acx + rr, cy + rr), fill=APP_COLORS["calendar"])
            else:
                col = AVATAR_COLORS[sum(map(ord, w.label)) % len(AVATAR_COLORS)]
                d.ellipse((acx - rr, cy - rr, acx + rr, cy + rr), fill=col)
            p.text(d, (acx, cy), w.label[:1].upper(), p.big, (255, 255, 255), bold=True, anchor="mm", kind="initial")
            tx = acx + rr + 0.03 * p.w
        max_w = x2 - tx - 0.1 * p.w
        danger = w.style.get("danger", False)
        done = w.style.get("done", False)
        col = (200, 40, 40) if danger else (MUTED if done else TEXT)
        if w.text and r == "list_item" and not done:
            p.text(d, (tx, y1 + bh * 0.32), w.label, p.big, col, bold=True, max_w=max_w)
            p.text(d, (tx, y1 + bh * 0.72), w.text, p.small, MUTED, max_w=max_w, kind="value")
        else:
            p.text(d, (tx, cy), w.label, p.big, col, bold=True, max_w=max_w)
            if done:
                tw = min(d.textlength(w.label, font=font(p.big)), max_w)
                d.line((tx, cy, tx + tw, cy), fill=MUTED, width=max(1, p.bold_dx + 1))
        if w.style.get("favorite"):
            _star(d, x2 - 0.06 * p.w, cy, bh * 0.28, (235, 170, 0))
    elif r == "checkbox":
        s = min(bw, bh) * 0.55
        cx = (x1 + x2) / 2
        box = (cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2)
        lw = max(2, p.bold_dx * 2)
        if w.style.get("checked"):
            d.rounded_rectangle(box, radius=max(2, round(s * 0.15)), fill=(30, 150, 70))
            d.line(
                [(box[0] + s * 0.2, cy), (cx - s * 0.05, box[3] - s * 0.22), (box[2] - s * 0.18, box[1] + s * 0.22)],
                fill=(255, 255, 255),
                width=lw,
            )
        else:
            d.rounded_rectangle(
                box, radius=max(2, round(s * 0.15)), fill=(255, 255, 255), outline=(80, 80, 80), width=lw
            )
    elif r == "button":
        col = BUTTON_COLORS.get(w.style.get("color", "blue"), BUTTON_COLORS["blue"])
        d.rounded_rectangle((x1, y1, x2, y2), radius=max(3, round(bh * 0.35)), fill=col)
        p.text(d, ((x1 + x2) / 2, cy), w.label, p.big, (255, 255, 255), bold=True, anchor="mm", max_w=bw * 0.92)
    elif r == "input":
        focused = w.style.get("focused", False)
        d.rectangle(
            (x1, y1, x2, y2),
            fill=(255, 255, 255),
            outline=(33, 110, 220) if focused else (150, 150, 150),
            width=max(3, p.bold_dx * 3) if focused else 1,
        )
        tx = x1 + 0.03 * p.w
        p.text(d, (tx, y1 + bh * 0.27), w.label, p.small, (33, 110, 220) if focused else MUTED)
        if w.text:
            p.text(d, (tx, y1 + bh * 0.68), w.text, p.big, TEXT, bold=True, max_w=bw * 0.9, kind="value")
        else:
            p.text(d, (tx, y1 + bh * 0.68), f"Enter {w.label.lower()}", p.small, (175, 175, 175), kind="placeholder")
        if focused:
            tw = d.textlength(p.fit(d, w.text, p.big, bw * 0.9), font=font(p.big)) + 2 * p.bold_dx if w.text else 0
            d.line((tx + tw, y1 + bh * 0.5, tx + tw, y1 + bh * 0.86), fill=(33, 110, 220), width=max(1, p.bold_dx))
    elif r == "toggle":
        on = w.style.get("on", False)
        d.rounded_rectangle((x1, y1, x2, y2), radius=rad, fill=ROW_BG, outline=ROW_LINE)
        p.text(d, (x1 + 0.04 * p.w, cy), w.label, p.big, TEXT, bold=True, max_w=bw * 0.6)
        ph = bh * 0.42
        pw = ph * 1.9
        px2 = x2 - 0.04 * p.w
        px1 = px2 - pw
        d.rounded_rectangle(
            (px1, cy - ph / 2, px2, cy + ph / 2), radius=round(ph / 2), fill=(30, 160, 70) if on else (185, 185, 185)
        )
        kr = ph * 0.4
        kx = px2 - ph / 2 if on else px1 + ph / 2
        d.ellipse((kx - kr, cy - kr, kx + kr, cy + kr), fill=(255, 255, 255))
    elif r == "text":
        if w.style.get("hint"):
            p.text(d, ((x1 + x2) / 2, cy), w.label, p.small, MUTED, anchor="mm")
            t = bh * 0.18
            tx = x2 + t
            d.polygon([(tx - t, cy - t / 2), (tx + t, cy - t / 2), (tx, cy + t / 2)], fill=MUTED)
        elif w.text:
            p.text(d, (x1 + 0.02 * p.w, y1 + bh * 0.28), w.label, p.small, MUTED)
            p.text(d, (x1 + 0.02 * p.w, y1 + bh * 0.68), w.text, p.big, TEXT, bold=True, max_w=bw * 0.95, kind="value")
            d.line((x1, y2, x2, y2), fill=ROW_LINE, width=1)
        else:
            p.text(d, (x1 + 0.02 * p.w, cy), w.label, p.big, TEXT, max_w=bw * 0.95)
    elif r == "bubble":
        out = w.style.get("outgoing", False)
        d.rounded_rectangle((x1, y1, x2, y2), radius=rad * 2, fill=(33, 110, 220) if out else (228, 228, 232))
        p.text(
            d, (x1 + 0.03 * p.w, cy), w.label, p.small + 1, (255, 255, 255) if out else TEXT, bold=True, max_w=bw * 0.9
        )
    elif r == "dialog":
        d.rounded_rectangle(
            (x1, y1, x2, y2),
            radius=max(4, round(0.02 * p.w)),
            fill=(255, 255, 255),
            outline=(60, 60, 60),
            width=max(2, p.bold_dx * 2),
        )
        p.text(d, ((x1 + x2) / 2, y1 + 0.04 * p.h), w.label, p.big + 1, TEXT, bold=True, anchor="mm", max_w=bw * 0.9)
    elif r == "loading":
        cx = (x1 + x2) / 2
        rr = bh * 0.25
        d.arc(
            (cx - rr, y1, cx + rr, y1 + 2 * rr),
            start=0,
            end=270,
            fill=APP_COLORS["calendar"],
            width=max(3, p.bold_dx * 4),
        )
        p.text(d, (cx, y1 + 2 * rr + bh * 0.2), w.label, p.big, MUTED, bold=True, anchor="mm")
    elif r == "nav":
        k = w.style.get("kind")
        cx, s = (x1 + x2) / 2, bh * 0.28
        white = (240, 240, 240)
        lw = max(2, p.bold_dx * 2)
        if k == "back":
            d.polygon([(cx - s, cy), (cx + s * 0.8, cy - s), (cx + s * 0.8, cy + s)], fill=white)
        elif k == "home":
            d.ellipse((cx - s, cy - s, cx + s, cy + s), outline=white, width=lw)
        else:
            d.rectangle((cx - s * 0.9, cy - s * 0.9, cx + s * 0.9, cy + s * 0.9), outline=white, width=lw)
    # "list" containers are invisible


def render_screen(screen: Screen, width: int = 280, height: int = 504) -> Image.Image:
    """RGB image of ``screen`` at ``width`` x ``height`` pixels."""
    return _render(screen, width, height, None)


def render_screen_spans(screen: Screen, width: int = 280, height: int = 504) -> tuple[Image.Image, list[TextSpan]]:
    """The image of :func:`render_screen` (the same pixels) and every string drawn on it, in paint
    order, as :class:`TextSpan` records. Strings of the dimmed background under a dialog are left
    out (they are not legible as drawn)."""
    spans: list[TextSpan] = []
    return _render(screen, width, height, spans), spans


def _render(screen: Screen, width: int, height: int, spans: list[TextSpan] | None) -> Image.Image:
    if width < 28 or height < 28:
        raise ValueError(f"render size {width}x{height} too small; use at least 28x28 px")
    p = _Painter(width, height)
    im = Image.new("RGB", (width, height), LAUNCHER_BG if screen.app == "launcher" else BG)
    d = ImageDraw.Draw(im)
    d.rectangle(p.px((0.0, NAV_Y, 1.0, 1.0)), fill=NAV_BG)
    if screen.dialog:
        for w in screen.background:
            _draw(p, d, w)
        im = Image.blend(im, Image.new("RGB", im.size, (0, 0, 0)), 0.45)
        d = ImageDraw.Draw(im)
    p.spans = spans
    for w in screen.widgets:
        p.widget = w
        _draw(p, d, w)
    return im


def render_with_boxes(
    image: Image.Image,
    boxes: Sequence[Sequence[float]],
    labels: Sequence[str] | None = None,
    points: Sequence[Sequence[float]] = (),
    color: RGB = (255, 0, 180),
) -> Image.Image:
    """Copy of ``image`` with normalised ``boxes`` outlined (and optional labels / points) for notebooks."""
    im = image.convert("RGB").copy()
    d = ImageDraw.Draw(im)
    W, H = im.size
    f = font(max(8, round(H * 0.022)))
    lw = max(2, round(H / 250))
    for i, b in enumerate(boxes):
        x1, y1, x2, y2 = b[0] * W, b[1] * H, b[2] * W, b[3] * H
        d.rectangle((x1, y1, x2, y2), outline=color, width=lw)
        if labels is not None and i < len(labels) and labels[i]:
            d.text((x1 + 2, max(0, y1 - f.size - 2)), str(labels[i]), font=f, fill=color)
    for pt in points:
        x, y = pt[0] * W, pt[1] * H
        r = 3 * lw
        d.ellipse((x - r, y - r, x + r, y + r), outline=color, width=lw)
    return im
