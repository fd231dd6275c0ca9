"""One step-matching engine for metrics and rewards: click, text and argument rules as data.

>>> from guirl.actions import Action
>>> from guirl.matching import RULES, match_step
>>> pred, gt = Action("type", text="milk"), Action("type", text="buy milk and eggs")
>>> [match_step(pred, gt, RULES[r]).exact for r in ("ccpo_reward_code", "ccpo_reward", "ccpo_androidcontrol")]
[True, False, False]

* :mod:`.rules`: the frozen records (:class:`ClickRule`, :class:`TextRule`,
  :class:`ArgumentRule`, bundled in a :class:`RuleSet`);
* :mod:`.engine`: :func:`match_step` and its parts (:func:`click_match`, :func:`text_match`,
  :func:`arguments_match`, :func:`target_distance`, :func:`scroll_direction`);
* :mod:`.text`: the public evaluators' text comparisons on normalised strings;
* :mod:`.registry`: the named rule sets :data:`RULES` of the evaluator protocols and the rewards.

The evaluator protocols (:mod:`guirl.metrics.protocols`) are a name, a rule set and provenance;
the rewards name the rule set they train with. ``docs/metrics.md`` lists which uses which.
"""

from guirl.matching.engine import (
    StepMatch,
    arguments_match,
    click_match,
    gt_point,
    is_counted,
    is_grounded,
    match_step,
    op_string,
    rule_boxes,
    rule_gt_point,
    scroll_direction,
    target_distance,
    text_match,
    types_match,
)
from guirl.matching.registry import RULES, TEXT_RULES, get_rules, get_text_rule, rules_differ
from guirl.matching.rules import (
    BOX_MODES,
    LONG_PRESS_AS_CLICK,
    SCROLL_MATCHES,
    TEXT_KINDS,
    UNITS,
    WAIT_AS_TERMINATE,
    ArgumentRule,
    ClickRule,
    RuleSet,
    TextRule,
)

__all__ = [
    "ArgumentRule",
    "BOX_MODES",
    "ClickRule",
    "LONG_PRESS_AS_CLICK",
    "RULES",
    "RuleSet",
    "SCROLL_MATCHES",
    "StepMatch",
    "TEXT_KINDS",
    "TEXT_RULES",
    "TextRule",
    "UNITS",
    "WAIT_AS_TERMINATE",
    "arguments_match",
    "click_match",
    "get_rules",
    "get_text_rule",
    "gt_point",
    "is_counted",
    "is_grounded",
    "match_step",
    "op_string",
    "rule_boxes",
    "rule_gt_point",
    "rules_differ",
    "scroll_direction",
    "target_distance",
    "text_match",
    "types_match",
]
