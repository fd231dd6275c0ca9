"""Tests for guirl.train.pretrain and the pretraining records of guirl.train.data: the config
section, multi-turn conversations, and TRL's loss mask on every answer (and nothing else)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guirl.config import ConfigError, load_config
from guirl.env import tasks as T
from guirl.env.pretraining import SKILLS, generate_samples
from guirl.models import build_tiny_model, load_model, load_processor
from guirl.train.data import pretraining_conversations, pretraining_records, sample_prompt, to_dataset
from guirl.train.pretrain import PretrainConfig
from guirl.train.sft import training_args

MIN_PX, MAX_PX = 3136, 141120


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("pt")
    return root, generate_samples(T.generate_tasks(6, seed=2, prefix="pt"), image_dir=root / "images", seed=0)


def test_the_tiny_profile_has_the_section_and_paper_profiles_do_not() -> None:
    tiny = load_config("tiny")
    assert tiny.pretrain == PretrainConfig() and set(tiny.pretrain.mix) <= set(SKILLS)
    assert load_config("paper-3b").pretrain is None


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("pretrain.mix={nope: 1}", "unknown skills"),
        ("pretrain.mix={read_point: -1}", r"samples per screen must lie in \[0, 100\]"),
        ("pretrain.turns=0", "pretrain.turns"),
        ("pretrain.max_steps=1e12", "pretrain.max_steps"),
        ("pretrain.learning_rate=5", "pretrain.learning_rate"),
        ("pretrain.lr_scheduler_type=step", "pretrain.lr_scheduler_type"),
        ("pretrain.n_turns=3", "unknown key"),
    ],
)
def test_bad_pretrain_values_are_refused_naming_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config("tiny", overrides=[override])


def test_points_and_boxes_are_written_in_the_pixels_the_model_sees(samples) -> None:
    root, ss = samples
    s = next(x for x in ss if x.skill == "read_point")
    q, a = sample_prompt(s, screen_size=(280, 504), min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert q == s.question.replace("{point}", f"({round(s.point[0] * 280)}, {round(s.point[1] * 504)})")
    assert a == s.answer
    # a smaller budget resizes the image: coordinates follow it
    q2, _ = sample_prompt(s, screen_size=(280, 504), min_pixels=MIN_PX, max_pixels=MAX_PX // 4)
    assert q2 != q
    g = next(x for x in ss if x.skill == "ground_label")
    q3, a3 = sample_prompt(g, screen_size=(280, 504), min_pixels=MIN_PX, max_pixels=MAX_PX)
    assert q3.endswith(f"Use the {g.format} action format.") and a3


def test_conversations_hold_every_sample_once_one_screenshot_each(samples) -> None:
    root, ss = samples
    convs = pretraining_conversations(
        ss, image_root=root, screen_size=(280, 504), min_pixels=MIN_PX, max_pixels=MAX_PX, turns=4
    )
    ids = [i for c in convs for i in c["sample_ids"]]
    assert sorted(ids) == sorted(s.sample_id for s in ss)
    records = {
        r["sample_id"]: r
        for r in pretraining_records(ss, image_root=root, screen_size=(280, 504), min_pixels=MIN_PX, max_pixels=MAX_PX)
    }
    for c in convs:
        users = [m for m in c["messages"] if m["role"] == "user"]
        assert 1 <= len(users) <= 4 and len(c["messages"]) == 2 * len(users)
        n_images = sum(1 for m in users for part in m["content"] if part["type"] == "image")
        assert n_images == len(c["images"]) <= 1
        assert users[0]["content"] == records[c["sample_ids"][0]]["prompt"][0]["content"]
        assert {records[i]["images"][0] if records[i]["images"] else None for i in c["sample_ids"]} == {
            c["images"][0] if c["images"] else None
        }


def test_trl_trains_on_every_answer_and_on_nothing_else(samples, tmp_path: Path) -> None:
    """The ``pretrain`` stage's collator (TRL, assistant_only_loss with its Qwen2.5-VL training
    template): the labelled tokens are exactly each turn's answer and its end-of-turn tokens."""
    from trl import SFTTrainer

    root, ss = samples
    convs = pretraining_conversations(
        ss[:24], image_root=root, screen_size=(280, 504), min_pixels=MIN_PX, max_pixels=MAX_PX, turns=3
    )
    folder = build_tiny_model(seed=0)
    processor = load_processor(folder, min_pixels=MIN_PX, max_pixels=MAX_PX)
    cfg = load_config("tiny", overrides=["pretrain.max_steps=1"])
    args = training_args(cfg, "pretrain", tmp_path / "out")
    assert args.assistant_only_loss and not args.completion_only_loss
    dataset = to_dataset(convs)
    trainer = SFTTrainer(model=load_model(folder), args=args, train_dataset=dataset, processing_class=processor)
    batch = trainer.data_collator([dataset[i] for i in range(4)])
    tok = processor.tokenizer
    for row, labels, conv in zip(batch["input_ids"], batch["labels"], convs[:4]):
        kept = [int(t) for t, lab in zip(row, labels) if int(lab) != -100]
        answers = [m["content"][0]["text"] for m in conv["messages"] if m["role"] == "assistant"]
        assert tok.decode(kept) == "".join(f"{a}<|im_end|>\n" for a in answers)
