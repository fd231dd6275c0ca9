"""guirl.train.lm_head: TRL's fused LM head scores only labelled positions on CPU, same loss."""

from __future__ import annotations

import importlib

import pytest
import torch

from guirl.train.lm_head import SWITCH, TRL_UTILS, compact_lm_head


def _tiny_lm():
    """A randomly initialised 2-layer Llama (no download) with TRL's fused LM head added."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = LlamaForCausalLM(cfg)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    return model


def _batch():
    """2 sequences of 40 tokens; only the last 5 of each are labelled (completion-only loss)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 97, (2, 40), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, -5:] = ids[:, -5:]
    return ids, labels


def _loss_grads_and_rows(model, monkeypatch, compact: bool):
    """Loss, LM-head weight gradient and the number of rows the head projected."""
    utils = importlib.import_module(TRL_UTILS)
    rows: list[int] = []
    kernel = importlib.import_module("trl.kernels").ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden, *args):
            rows.append(hidden.shape[0])
            return kernel.apply(hidden, *args)

    monkeypatch.setattr(utils, "_ChunkedLogProbFunction", Spy)
    model.zero_grad()
    ids, labels = _batch()
    with compact_lm_head(compact):
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
    out.loss.backward()
    grad = model.get_output_embeddings().weight.grad.clone()
    return out.loss.detach(), out.entropy.detach(), grad, rows


def test_compact_head_projects_only_labelled_positions_with_the_same_loss(monkeypatch):
    model = _tiny_lm()
    loss_all, ent_all, grad_all, rows_all = _loss_grads_and_rows(model, monkeypatch, compact=False)
    loss_c, ent_c, grad_c, rows_c = _loss_grads_and_rows(model, monkeypatch, compact=True)
    # as shipped on CPU: every shifted position (2 x 39) goes through the head
    assert rows_all == [2 * 39]
    # compact: only the 2 x 5 labelled next-token positions
    assert rows_c == [2 * 5]
    torch.testing.assert_close(loss_c, loss_all)
    torch.testing.assert_close(grad_c, grad_all)
    # entropy at labelled positions is the same; unlabelled ones are 0 in both
    torch.testing.assert_close(ent_c, ent_all)


def test_switch_is_restored_after_the_block_and_after_an_error():
    utils = importlib.import_module(TRL_UTILS)
    before = getattr(utils, SWITCH)
    with compact_lm_head():
        assert getattr(utils, SWITCH)(torch.device("cpu")) is True
    assert getattr(utils, SWITCH) is before
    with pytest.raises(KeyError), compact_lm_head():
        raise KeyError("boom")
    assert getattr(utils, SWITCH) is before


def test_disabled_leaves_trl_untouched():
    utils = importlib.import_module(TRL_UTILS)
    before = getattr(utils, SWITCH)
    with compact_lm_head(enabled=False):
        assert getattr(utils, SWITCH) is before
        assert getattr(utils, SWITCH)(torch.device("cpu")) is False


def test_missing_switch_raises_a_fix_it_error(monkeypatch):
    # a TRL that decides compact scoring another way must not be silently left as is
    utils = importlib.import_module(TRL_UTILS)
    monkeypatch.delattr(utils, SWITCH)
    entered: list[bool] = []
    with pytest.raises(RuntimeError, match=r"trl\.trainer\.utils\._use_triton.*runtime\.compact_lm_head: false"):
        with compact_lm_head():
            entered.append(True)
    assert entered == []  # the error comes before the block runs
