"""Transformers', an RNN language model's and a recommender's layers, network by network
(sources: `layer_specs`)."""

from __future__ import annotations

from collections.abc import Callable

from .layer_specs import Rows, attention, bmm, conv, dense, ln, matmul, softmax


def _vit_b16() -> Rows:
    layer = "encoder.layers.encoder_layer_0"
    return [
        ("conv_proj", conv(3, 224, 768, 16, 16)),
        (f"{layer}.ln_1", ln(197, 768)),
        (f"{layer}.self_attention.in_proj", dense(197, 2304, 768)),
        *attention(f"{layer}.self_attention", 12, 197, 197, 64),
        (f"{layer}.self_attention.out_proj", dense(197, 768, 768)),
        (f"{layer}.mlp.0", dense(197, 3072, 768, "bias+gelu")),
        (f"{layer}.mlp.3", dense(197, 768, 3072)),
        ("heads.head", dense(1, 1000, 768)),
    ]


def _swin_t() -> Rows:
    rows = [("features.0.0", conv(3, 224, 96, 4, 4)), ("features.0.2", ln(56 * 56, 96))]
    # 7x7 windows of 49 tokens, 32 channels per head; heads 3, 6, 12, 24 on 56, 28, 14, 7 grids
    h = 56
    for stage, dim in enumerate((96, 192, 384, 768)):
        block = f"features.{2 * stage + 1}.0"
        windows, heads = (h // 7) ** 2, dim // 32
        rows += [
            (f"{block}.attn.qkv", dense(h * h, 3 * dim, dim)),
            *attention(f"{block}.attn", windows * heads, 49, 49, 32),
            (f"{block}.mlp.0", dense(h * h, 4 * dim, dim, "bias+gelu")),
        ]
        h //= 2
    return rows


def _at(setting: str, rows: Rows) -> Rows:
    """``rows`` of one setting (a sequence length, prefill or decode): each name gets
    ``@setting``, so a layer listed at several shapes keeps distinct names."""
    return [(f"{name}@{setting}", spec) for name, spec in rows]


def _bert_base() -> Rows:
    layer = "encoder.layer.0"
    rows = []
    for seq in (128, 384):
        rows += _at(
            f"seq{seq}",
            [
                ("embeddings.LayerNorm", ln(seq, 768)),
                (f"{layer}.attention.self.query", dense(seq, 768, 768)),
                *attention(f"{layer}.attention.self", 12, seq, seq, 64),
                (f"{layer}.intermediate.dense", dense(seq, 3072, 768, "bias+gelu")),
                (f"{layer}.output.dense", dense(seq, 768, 3072)),
            ],
        )
    return [*rows, ("pooler.dense", dense(1, 768, 768))]


def _gpt2_small() -> Rows:
    rows = []
    # a 256-token prompt, then one token attending to the 256 cached ones and itself
    for setting, queries, keys in (("prefill256", 256, 256), ("decode257", 1, 257)):
        rows += _at(
            setting,
            [
                ("h.0.ln_1", ln(queries, 768)),
                ("h.0.attn.c_attn", matmul(queries, 2304, 768)),
                *attention("h.0.attn", 12, queries, keys, 64),
                ("h.0.attn.c_proj", matmul(queries, 768, 768)),
                ("h.0.mlp.c_fc", matmul(queries, 3072, 768, "bias+gelu")),
                ("h.0.mlp.c_proj", matmul(queries, 768, 3072)),
            ],
        )
    return [*rows, ("lm_head@decode257", dense(1, 50257, 768))]


def _lstm_lm() -> Rows:
    rows = []
    for config, hidden in (("medium", 650), ("large", 1500)):
        # the input projection of a 35-step window at once; the recurrence one step at a time
        rows += _at(
            config,
            [
                ("rnn.weight_ih_l0", dense(35, 4 * hidden, hidden)),
                ("rnn.weight_hh_l0", dense(1, 4 * hidden, hidden)),
                ("decoder", dense(35, 10000, hidden)),
            ],
        )
    return [*rows, ("log_softmax", softmax(35, 10000))]


def _dlrm() -> Rows:
    return [
        ("bot_l.0", dense(1, 512, 13, "bias+relu")),
        ("bot_l.2", dense(1, 256, 512, "bias+relu")),
        ("bot_l.4", dense(1, 128, 256, "bias+relu")),
        # pairwise dot products of the 26 embeddings and the dense feature: T·Tᵀ
        ("interact_features.bmm", bmm(1, 27, 27, 128)),
        ("top_l.0", dense(1, 1024, 479, "bias+relu")),
        ("top_l.2", dense(1, 1024, 1024, "bias+relu")),
        ("top_l.4", dense(1, 512, 1024, "bias+relu")),
        ("top_l.6", dense(1, 256, 512, "bias+relu")),
        ("top_l.8", dense(1, 1, 256)),
    ]


SEQUENCE_NETWORKS: dict[str, Callable[[], Rows]] = {
    "vit_b16": _vit_b16,
    "swin_t": _swin_t,
    "bert_base": _bert_base,
    "gpt2_small": _gpt2_small,
    "lstm_lm": _lstm_lm,
    "dlrm": _dlrm,
}
