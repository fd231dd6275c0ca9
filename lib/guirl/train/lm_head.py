"""Score only the labelled positions in TRL's fused LM head on every device (CPU included).

TRL 1.16's ``SFTTrainer`` computes the loss with a fused LM head
(``trl.trainer.utils.add_fused_lm_head``): the backbone's last hidden states go through the
LM head in tiles and come back as per-token log-probabilities. On devices with Triton (CUDA,
XPU) it projects only the positions whose next-token label is not ``-100``. Elsewhere it projects
*every* position (to keep tile shapes fixed for compilers such as Neuron's) and zeroes the
unlabelled ones afterwards. Both give the same loss: the unlabelled positions are multiplied by 0.

With ``completion_only_loss`` a tiny-profile 1AO sample has 644 positions of which about 20 are
labelled, so on CPU the head does 30x the work it needs: 23% of an SFT step of the tiny model
(batch 8, 1 thread; ``docs/stack.md``). :func:`compact_lm_head` makes TRL take its compact
branch on every device while the tile kernels themselves keep their torch fallback, so the loss
is the same sum over the same labelled positions (float order aside) and training is faster.

The switch is TRL's module-level ``_use_triton`` name in ``trl.trainer.utils``, read at call time
by the fused forward; ``trl.kernels.chunked_logprob`` keeps its own binding, so no Triton kernel is
ever asked to run on a CPU. If a TRL upgrade removes that name, :func:`compact_lm_head` raises
instead of silently doing nothing (``tests/test_train_lm_head.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: the module whose name decides whether only labelled positions are scored
TRL_UTILS = "trl.trainer.utils"
#: the name that decides it (``compact = _use_triton(hidden_states.device)``)
SWITCH = "_use_triton"


@contextlib.contextmanager
def compact_lm_head(enabled: bool = True) -> Iterator[None]:
    """Within the block, TRL's fused LM head projects only labelled positions on any device.

    ``enabled=False`` leaves TRL untouched (the as-shipped behaviour). Raises ``RuntimeError``
    naming the module and attribute when the installed TRL has no such switch.
    """
    if not enabled:
        yield
        return
    import importlib

    utils = importlib.import_module(TRL_UTILS)
    original = getattr(utils, SWITCH, None)
    if original is None:
        raise RuntimeError(
            f"{TRL_UTILS}.{SWITCH} not found: this TRL version decides the fused LM head's compact scoring "
            "another way. Set runtime.compact_lm_head: false (TRL's own behaviour) or update guirl.train.lm_head."
        )
    setattr(utils, SWITCH, lambda device: True)
    try:
        yield
    finally:
        setattr(utils, SWITCH, original)
