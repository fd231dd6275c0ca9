"""MiniGUI: a deterministic simulated phone, its task generator and scripted expert.

``MiniGUIEnv`` (gymnasium-style reset/step), ``generate_tasks`` / ``Task`` (seeded tasks with
state predicates), ``solve`` (scripted expert recording trajectories), ``render_with_boxes``.
"""

from guirl.env.core import MiniGUIEnv
from guirl.env.render import render_screen, render_with_boxes
from guirl.env.state import APPS, PhoneState
from guirl.env.tasks import CATEGORIES, TEMPLATES, Task, generate_tasks, random_world

__all__ = [
    "APPS",
    "CATEGORIES",
    "MiniGUIEnv",
    "PhoneState",
    "TEMPLATES",
    "Task",
    "generate_tasks",
    "random_world",
    "render_screen",
    "render_with_boxes",
]
