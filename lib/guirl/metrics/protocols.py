"""Named evaluator protocols: a name, a matching rule set and where it comes from.

A :class:`Protocol` says which public evaluator's conventions a step-level number follows. Its
rules (when a click is right, how text is compared, in which convention scroll directions are
compared, how stop / wait / long press are matched) are a :class:`~guirl.matching.RuleSet` of
:data:`guirl.matching.RULES`, interpreted by the one matching engine
(:func:`guirl.matching.match_step`, called by :func:`guirl.metrics.step.score_step`). This
module adds provenance only: the coordinate space the original code reads, its source and
notes. ``docs/metrics.md`` tabulates every protocol.

Units: every point and box is normalised to ``[0, 1]`` by the screenshot's width and height.
Evaluators that work in ``[0, 1000]`` (AgentCPM-GUI, GUI-Odyssey) or in pixels divided by
width/height (UI-S1, CES, GUI-R1, CCPO) compare the same normalised quantities, so their
thresholds apply unchanged; ``coordinates`` records what the original code reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from guirl.matching import RULES, RuleSet, get_rules

__all__ = ["Protocol", "PROTOCOLS", "get_protocol"]


@dataclass(frozen=True)
class Protocol:
    """How one public evaluator decides that a predicted step matches the ground truth.

    Attributes:
        name: registry key.
        rules: the matching rule set (a :class:`~guirl.matching.RuleSet`, or its name in
            :data:`guirl.matching.RULES`).
        coordinates: the coordinate space the original evaluator reads.
        source: where every rule comes from (repository file, paper section).
        notes: what the original code does beyond the rules (e.g. a direction flip).
    """

    name: str
    rules: RuleSet
    coordinates: str = "normalised [0,1]"
    source: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "rules", get_rules(self.rules))
        except KeyError as e:
            raise ValueError(f"Protocol {self.name!r}: {e.args[0]}") from None


PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(
            "agentcpm",
            RULES["agentcpm"],
            coordinates="[0,1000]",
            source="AgentCPM-GUI eval/utils/evaluator.py: 1.2x boxes containing gt, else 0.14",
            notes="compares the finger direction of start->end; AndroidControl content directions are converted",
        ),
        Protocol(
            "agentcpm_androidcontrol",
            RULES["agentcpm_androidcontrol"],
            coordinates="[0,1000]",
            source="AgentCPM-GUI eval/utils/evaluator.py (eval_android_control): 5 nearest 1.2x boxes, else 0.04",
            notes="as agentcpm",
        ),
        Protocol(
            "guiodyssey",
            RULES["guiodyssey"],
            coordinates="[0,1000]",
            source="GUI-Odyssey evaluator (stack-facts): in box or 0.14; contains or ANLS>=0.5",
        ),
        Protocol(
            "uis1",
            RULES["uis1"],
            coordinates="pixels / (width, height)",
            source="UI-S1 evaluation/qwenvl_utils.py: 1.2x candidate box or 0.04",
            notes="eval ignores direction; the reward flips gt up/down (content -> finger)",
        ),
        Protocol(
            "guir1",
            RULES["guir1"],
            coordinates="pixels / (width, height)",
            source="GUI-R1 r1gui_accuracy_reward: within 0.14 (strict), F1>=0.5",
        ),
        Protocol(
            "aitz",
            RULES["aitz"],
            coordinates="normalised (y, x) [0,1]",
            source="AITW action_matching (same box or 0.14); AITZ CoAT evaluate.py (contains or ratio>0.8)",
            notes="AITW itself enlarges 1.4x; AITZ and Qwen2.5-VL 1.2x",
        ),
        Protocol(
            "mind2web",
            RULES["mind2web"],
            coordinates="pixels of the page screenshot",
            source="Mind2Web (Deng et al. 2023) Sec. 4; SeeClick mind2web eval: click in gt box, op F1==1",
            notes="Ele.Acc / Op.F1 / Step SR in guirl.metrics.mind2web",
        ),
        Protocol(
            "ces",
            RULES["ces"],
            coordinates="pixels / (width, height)",
            source="CES reward (stack-facts): in box or 0.14; F1>=0.5",
        ),
        Protocol(
            "ccpo",
            RULES["ccpo"],
            coordinates="pixels / (width, height)",
            source="CCPO code (stack-facts): within 0.1",
        ),
        Protocol(
            "coepg",
            RULES["coepg"],
            coordinates="pixels / (width, height)",
            source="Co-EPG (stack-facts): F1>=0.5; click rule assumed in box or 0.14",
        ),
    )
}


def get_protocol(name: str | Protocol | RuleSet) -> Protocol:
    """The registered protocol called ``name``; a :class:`Protocol` is returned as is and a bare
    :class:`~guirl.matching.RuleSet` is wrapped in an unregistered protocol of the same name."""
    if isinstance(name, Protocol):
        return name
    if isinstance(name, RuleSet):
        return Protocol(name.name, name, source=name.source)
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r}; registered: {sorted(PROTOCOLS)}") from None
