"""Named evaluator protocols: a matching rule set, the original's reading of the output, provenance.

A :class:`Protocol` says which public evaluator's conventions a step-level number follows. Its
rules (when a click is right, how text is compared, how scroll directions are compared, how stop
/ wait / long press are matched, which steps are counted) are a
:class:`~guirl.matching.RuleSet` of :data:`guirl.matching.RULES`, interpreted by the one
matching engine (:func:`guirl.matching.match_step`, called by
:func:`guirl.metrics.step.score_step`). The protocol adds how the original pipeline reads a model
output (:meth:`Protocol.parse`: an output format read strictly, as that pipeline reads it) and
where everything comes from. ``docs/metrics.md`` tabulates every protocol.

Two kinds:

* **as run** (``variant_of`` is ``None``): the original evaluator exactly as the code behind
  the published table runs it, quirks and bugs included; ``tests/test_golden.py`` checks every
  row of its golden file (``golden``) against the original's verdicts. Use these to put a number
  next to a published one.
* **variants** (``variant_of`` names the as-run protocol): a corrected evaluator (where a quirk
  is a bug) or a paper's stated rule (where the paper states one different from the code);
  ``changes`` says what differs.

Units: every point and box is normalised to ``[0, 1]`` by the screenshot's width and height;
rules that work in the original's pixels or ``[0, 1000]`` grid convert (``ClickRule.units``),
so pass ``screen_size`` to :func:`~guirl.metrics.score_step`. ``coordinates`` records what the
original code reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from guirl.actions.formats import FormatContext, get_format
from guirl.actions.types import ParseResult
from guirl.matching import RULES, RuleSet, get_rules

__all__ = ["Protocol", "PROTOCOLS", "get_protocol", "as_run_protocols"]


@dataclass(frozen=True)
class Protocol:
    """How one public evaluator decides that a predicted step matches the ground truth.

    Attributes:
        name: registry key.
        rules: the matching rule set (a :class:`~guirl.matching.RuleSet`, or its name in
            :data:`guirl.matching.RULES`).
        coordinates: the coordinate space the original evaluator reads.
        source: where every rule comes from (repository @ commit : file :: function, or paper
            section).
        notes: what the original pipeline does beyond the rules (data conversion, crashes).
        output_format: the action format (:mod:`guirl.actions.formats`) whose strict reading is
            the original pipeline's; ``None``: no model-output format (the protocol scores
            canonical actions only).
        pipeline: which strict reading of ``output_format`` (``None``: the format's default);
            ``strict=False`` reads it tolerantly (a paper's stated format, no original code).
        strict: read the output strictly (as the original pipeline does).
        golden: the golden file (``tests/fixtures/golden/<golden>.jsonl``) and, after a colon,
            the rows' ``variant`` it reproduces (``"ccpo:ac"``); ``None`` for variants.
        verdict: which verdict of the golden rows it reproduces: ``"verdict"`` (the original as
            run) or ``"variants.<name>"`` (a second run of the original recorded in the rows).
        variant_of: the as-run protocol a variant changes (``None``: as run).
        changes: what the variant changes, in one sentence.
    """

    name: str
    rules: RuleSet
    coordinates: str = "normalised [0,1]"
    source: str = ""
    notes: str = ""
    output_format: str | None = None
    pipeline: str | None = None
    strict: bool = True
    golden: str | None = None
    verdict: str = "verdict"
    variant_of: str | None = None
    changes: str = ""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "rules", get_rules(self.rules))
        except KeyError as e:
            raise ValueError(f"Protocol {self.name!r}: {e.args[0]}") from None
        if self.output_format is not None:
            try:
                get_format(self.output_format)
            except KeyError as e:
                raise ValueError(f"Protocol {self.name!r}: {e.args[0]}") from None
        if self.variant_of is not None and not self.changes:
            raise ValueError(f"Protocol {self.name!r}: a variant must say what it changes")

    def parse(self, text: str, ctx: FormatContext) -> ParseResult:
        """Read a model output as the original pipeline does (never raises).

        ``ctx`` gives the screen (and, for Co-EPG, the grounded point); the protocol sets
        ``strict`` and ``pipeline``.
        """
        if self.output_format is None:
            return ParseResult.fail(f"protocol {self.name!r} reads no model-output format", raw=text)
        return get_format(self.output_format).parse(text, replace(ctx, strict=self.strict, pipeline=self.pipeline))


_AGENTCPM = "OpenBMB/AgentCPM-GUI @ acbaf509b8af"
_CCPO = "HiThink-Research/CCPO"

PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        # ---------------------------------------------------------------- as run
        Protocol(
            "agentcpm",
            RULES["agentcpm"],
            coordinates="[0,1000]",
            source=f"{_AGENTCPM}: eval/utils/evaluator.py::ActionEvaluator.__call__, run by eval/run_eval_agent.py",
            notes=(
                "output read by eval/run_predict_minicpm.py::extract_and_validate_json and "
                "utils/convert_output.py::parse_action (JSON schema); DEEP_LINK, CLEAR, a bare duration "
                "and a POINT under 200 ms are stops"
            ),
            output_format="agentcpm",
            pipeline="agentcpm",
            golden="agentcpm",
        ),
        Protocol(
            "agentcpm_androidcontrol",
            RULES["agentcpm_androidcontrol"],
            coordinates="[0,1000]",
            source=(
                f"{_AGENTCPM}: eval/utils/evaluator.py::ActionEvaluator.__call__ (eval_android_control=True); "
                "ground truth from eval/eval_data/process_ac.py"
            ),
            notes="process_ac.py turns long presses into taps, drops open_app steps and lists every a11y node",
            output_format="agentcpm",
            pipeline="agentcpm",
            golden="agentcpm_androidcontrol",
        ),
        Protocol(
            "guiodyssey",
            RULES["guiodyssey"],
            coordinates="[0,1000]",
            source=(
                "OpenGVLab/GUI-Odyssey @ fefcbe9d76e2: src/eval_mm/evaluate_GUIOdyssey.py::action_matching_evaluation "
                "with GUIOdyssey_action_matching.action_matching"
            ),
            notes="answer strings split at ':' (simple_decode); an exception is 'invalid', which type accuracy counts",
            output_format="odyssey",
            pipeline="guiodyssey",
            golden="guiodyssey",
        ),
        Protocol(
            "uis1",
            RULES["uis1"],
            coordinates="resized pixels / resized size (prediction), pixels / size (ground truth)",
            source=(
                "X-PLUG/MobileAgent @ 11cea575561f: UI-S1/evaluation/eval_qwenvl.py::process_line -> "
                "qwenvl_utils.py::evaluate_android_control_action"
            ),
            notes=(
                "fix_line drops every candidate box (0.04 only); any exception ends the episode and resets "
                "its progress to 0"
            ),
            output_format="ccpo",
            pipeline="uis1",
            golden="uis1",
        ),
        Protocol(
            "guir1",
            RULES["guir1"],
            coordinates="resized pixels x original / resized size",
            source=(
                "ritzz-ai/GUI-R1 @ d43eea2f1c52: guir1/eval/eval_omni.py::evaluate, fed by "
                "guir1/inference/inference_vllm_android.py (extract_action / extract_coord / extract_input_text)"
            ),
            notes="a category enters a rate's denominator only if it has a hit (not modelled per step)",
            output_format="ces_executor",
            pipeline="guir1",
            golden="guir1",
        ),
        Protocol(
            "aitz",
            RULES["aitz"],
            coordinates="bbox [0,1000] -> pixels",
            source=(
                "IMNearth/CoAT @ 9ab1a9f0e765: coat/evaluate.py::ActionEvaluator.__call__; predictions as "
                "coat/agent.py::ScreenAgent.predict stores them"
            ),
            notes="the released evaluator scores every click against the point (0, 0) (see aitz_fixed)",
            output_format="coat",
            pipeline="coat",
            golden="aitz",
        ),
        Protocol(
            "mind2web",
            RULES["mind2web"],
            coordinates="normalised [0,1] click_point",
            source="njucckevin/SeeClick @ 0ef37ac4d7aa: agent_tasks/mind2web_test.py (per-step loop)",
            notes="Ele.Acc / Op.F1 / Step SR aggregation in guirl.metrics.mind2web",
            output_format="seeclick",
            pipeline="seeclick",
            golden="mind2web",
        ),
        Protocol(
            "ces",
            RULES["ces"],
            coordinates="pixels / (width, height) of extra_info",
            source="hehehahi4/CES @ bf54b363eb76: verl/utils/reward_score/gui.py::acc_reward",
            notes="the Executor's answer scored against the gt action string (gui_navigator_score / gui_tracker_score)",
            output_format="ces_executor",
            pipeline="ces",
            golden="ces",
        ),
        Protocol(
            "ccpo_androidcontrol",
            RULES["ccpo_androidcontrol"],
            coordinates="resized pixels -> original pixels (rounded)",
            source=(
                f"{_CCPO} @ a2686b326f34: evaluation/evaluation_AC_AO_sequence_final.py::action_matching_evaluation"
            ),
            notes=(
                "the published script calls action_matching_evaluation(outputs, metric='macro') and stops with a "
                "TypeError before printing a metric; this is the function as defined. Its second pass at the "
                "OS-Atlas resize is not registered"
            ),
            output_format="ccpo",
            pipeline="ccpo_androidcontrol",
            golden="ccpo:ac",
        ),
        Protocol(
            "ccpo_guiodyssey",
            RULES["ccpo_guiodyssey"],
            coordinates="[0,1000] (pixels above 1000 converted from the resized image)",
            source=f"{_CCPO} @ afc1a2b12de8: evaluation/evaluation_guio.py::new_action_matching_evaluation",
            output_format="ccpo",
            pipeline="ccpo_guiodyssey",
            golden="ccpo:guio",
        ),
        Protocol(
            "ccpo_mind2web",
            RULES["ccpo_mind2web"],
            coordinates="resized pixels -> original pixels -> normalised, 3 decimals",
            source=f"{_CCPO} @ a064abac3abe: evaluation/evaluation_mind2web.py::mind2web_evaluation",
            output_format="ccpo",
            pipeline="ccpo_mind2web",
            golden="ccpo:mind2web",
        ),
        Protocol(
            "ccpo_aitw",
            RULES["ccpo_aitw"],
            coordinates="resized pixels / resized size, 3 decimals",
            source=(
                f"{_CCPO} @ a2686b326f34: evaluation/evaluation_AITW_sequence_final_coord.py (per-step block) with "
                "evaluation/action_matching.py::check_actions_match"
            ),
            output_format="ccpo",
            pipeline="ccpo_aitw",
            golden="ccpo:aitw",
        ),
        # CCPO reports four benchmarks with four evaluators; plain "ccpo" is its AndroidControl
        # evaluator, the benchmark guirl's CCPO notebooks reproduce (docs/metrics.md).
        Protocol(
            "ccpo",
            RULES["ccpo_androidcontrol"],
            coordinates="resized pixels -> original pixels (rounded)",
            source=(
                f"{_CCPO} @ a2686b326f34: evaluation/evaluation_AC_AO_sequence_final.py::action_matching_evaluation "
                "(= ccpo_androidcontrol)"
            ),
            notes="the AndroidControl evaluator; ccpo_guiodyssey / ccpo_mind2web / ccpo_aitw for the other tables",
            output_format="ccpo",
            pipeline="ccpo_androidcontrol",
            golden="ccpo:ac",
        ),
        Protocol(
            "coepg",
            RULES["coepg"],
            coordinates="grounder's resized pixels -> normalised",
            source="Co-EPG (AAAI 2026) App. A: UGround element mapping; no public code",
            notes="paper's stated rule; the argument rule of non-click steps is assumed (not stated)",
            output_format="coepg_planner",
            strict=False,
            golden="coepg:androidcontrol",
        ),
        Protocol(
            "coepg_mind2web",
            RULES["coepg_mind2web"],
            coordinates="grounder's pixels -> normalised",
            source="Co-EPG (AAAI 2026) Sec. 5.1: Multimodal-Mind2Web Ele.Acc / Op.F1 / Step SR; no public code",
            output_format="coepg_planner",
            strict=False,
            golden="coepg:mind2web",
        ),
        # ---------------------------------------------------------------- variants
        Protocol(
            "uis1_candidates",
            RULES["uis1_candidates"],
            coordinates="as uis1",
            source="UI-S1 qwenvl_utils.py::evaluate_android_control_action given the file's check_options",
            output_format="ccpo",
            pipeline="uis1",
            golden="uis1",
            verdict="variants.file_check_options",
            variant_of="uis1",
            changes=(
                "uses the std file's candidate boxes (1.2x about the centre, then 0.04) and a click on the app's box "
                "opens it, as qwenvl_utils intends; the published fix_line drops the boxes"
            ),
        ),
        Protocol(
            "aitz_fixed",
            RULES["aitz_fixed"],
            coordinates="as aitz",
            source="CoAT coat/evaluate.py::_check_click_ with the annotated click point",
            output_format="coat",
            pipeline="coat",
            variant_of="aitz",
            changes="a click's gt point is result_touch_yx (the released code leaves it at (0, 0))",
        ),
        Protocol(
            "ces_paper",
            RULES["ces_paper"],
            coordinates="as ces",
            source="CES Sec. 5.1 (CES-28/29): GR = point inside the gt box; SR = type and parameters, text F1 > 0.5",
            output_format="ces_executor",
            pipeline="ces",
            variant_of="ces",
            changes=(
                "a click is right only inside the gt box, the acted element's (no other candidate box, no 0.14 "
                "fallback) and a scroll needs the gt's direction (a scroll() without one is wrong)"
            ),
        ),
        Protocol(
            "ccpo_androidcontrol_fixed",
            RULES["ccpo_androidcontrol_fixed"],
            coordinates="as ccpo_androidcontrol",
            source="CCPO evaluation_AC_AO_sequence_final.py with the threshold its comment states",
            output_format="ccpo",
            pipeline="ccpo_androidcontrol",
            variant_of="ccpo_androidcontrol",
            changes=(
                "a click is right within 0.14 of the screen (per-axis normalised), as the script's comment says, "
                "instead of within 140 original pixels (0.13 of a 1080-wide screen, 0.5 of a 280-wide one)"
            ),
        ),
        Protocol(
            "ccpo_aitw_fixed",
            RULES["ccpo_aitw_fixed"],
            coordinates="as ccpo_aitw",
            source="CCPO AITW evaluation with the annotation boxes grown to 1.4x",
            output_format="ccpo",
            pipeline="ccpo_aitw",
            variant_of="ccpo_aitw",
            changes="annotation boxes grow to 1.4x their size (AITW's fraction 1.4 grows them by 1.4 x size, to 2.4x)",
        ),
        Protocol(
            "coepg_distance",
            RULES["coepg_distance"],
            coordinates="grounder's resized pixels -> normalised",
            source="guirl's Co-EPG rule before the paper's was implemented (gt box or 0.14, token F1 >= 0.5)",
            output_format="coepg_planner",
            strict=False,
            variant_of="coepg",
            changes="a click is right inside the gt box or within 0.14 of the gt point, instead of the same smallest element",
        ),
    )
}


def as_run_protocols() -> list[str]:
    """Names of the protocols that reproduce an original evaluator as run (not variants)."""
    return [n for n, p in PROTOCOLS.items() if p.variant_of is None]


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
