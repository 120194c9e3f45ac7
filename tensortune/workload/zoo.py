"""Layer shapes of real networks as workload specs: what kernels must be fast on beyond round sizes.

Benchmarks (``benchmarks/tune_suite.py --suite models``) and the cost-model dataset draw from this
catalog so that tuning is judged on the shapes models have: 197 tokens, 35x35 and 17x17 grids,
channel counts of 24, 40, 112, 5x5 and 7x7 windows, stride-4 and stride-16 patch stems.

Every shape is batch 1 inference in the layout the source network runs (NCHW for the PyTorch
CNNs), derived from the networks' definitions:

- resnet50, resnext50_32x4d, mobilenet_v2, efficientnet_b0, inception_v3, shufflenet_v2 (x1.0),
  densenet121, convnext_tiny, vit_b16, swin_t, alexnet: torchvision.models at 224x224
  (inception_v3 at 299x299); layer names are torchvision's module paths.
- bert_base: Hugging Face ``bert-base-uncased`` config (hidden 768, 12 heads, FFN 3072) at
  sequence lengths 128 and 384 (SQuAD); gpt2_small: Hugging Face ``gpt2`` (768, 12 heads, its
  ``Conv1D`` layers are ``x @ W``, i.e. matmul), a 256-token prefill and the decode step after it.
- lstm_lm: PyTorch's word_language_model example with Zaremba et al.'s medium (650) and large
  (1500) configurations, 10000-word vocabulary, 35-step BPTT window.
- dlrm: facebookresearch/dlrm, MLPerf Criteo Terabyte config (bottom MLP 13-512-256-128,
  26 sparse features of dimension 128, top MLP 479-1024-1024-512-256-1).
- yolov5s: ultralytics yolov5s.yaml (v6+, width 0.5, depth 0.33) at 640x640.

Names are the layer as the source calls it; the ops with no module of their own (attention's
two batched GEMMs and its softmax) are named after the module that runs them. Where one layer
occurs at several shapes (sequence lengths, prefill and decode) the name carries ``@`` and the
setting. Asymmetric padding (Inception's 1x7 and 7x1 convs, pad (0, 3)) has no spec form, so
those layers are given on the input padded beforehand with pad=0: the same output and the same
arithmetic. Layers tensortune has no op for (average pooling, elementwise gates) are left out;
identical specs within a family are listed once, under the first layer that has them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SpecError


@dataclass(frozen=True)
class Layer:
    """One layer of a real network: where it comes from and the workload spec it runs."""

    family: str
    name: str
    spec: str


_Rows = list[tuple[str, str]]
"""(layer name, spec) pairs, as each family's builder lists them."""


def _conv(
    c: int, h: int, k: int, r: int, stride: int = 1, pad: int = 0, groups: int = 1, **kw: int
) -> str:
    """A square-input conv2d spec (``W`` and ``S`` default to ``H`` and ``R``)."""
    w, s = kw.get("w", h), kw.get("s", r)
    spec = f"conv2d:C={c},H={h},W={w},K={k},R={r},S={s}"
    spec += f",stride={stride}" if stride != 1 else ""
    spec += f",pad={pad}" if pad else ""
    return spec + (f",groups={groups}" if groups != 1 else "")


def _dw(c: int, h: int, r: int, stride: int = 1) -> str:
    """A depthwise conv with 'same' padding, as all the catalogued networks use."""
    spec = f"depthwise_conv2d:C={c},H={h},W={h},R={r},S={r},pad={r // 2}"
    return spec + (f",stride={stride}" if stride != 1 else "")


def _pool(c: int, h: int, r: int, stride: int, pad: int = 0) -> str:
    return f"maxpool2d:C={c},H={h},W={h},R={r},S={r},stride={stride}" + (
        f",pad={pad}" if pad else ""
    )


def _dense(m: int, n: int, k: int, epilogue: str = "") -> str:
    return f"dense:M={m},N={n},K={k}" + (f",epilogue={epilogue}" if epilogue else "")


def _matmul(m: int, n: int, k: int, epilogue: str = "") -> str:
    return f"matmul:M={m},N={n},K={k}" + (f",epilogue={epilogue}" if epilogue else "")


def _bmm(b: int, m: int, n: int, k: int) -> str:
    return f"batch_matmul:B={b},M={m},N={n},K={k}"


def _softmax(rows: int, cols: int) -> str:
    return f"softmax:rows={rows},cols={cols}"


def _ln(rows: int, cols: int) -> str:
    return f"layernorm:rows={rows},cols={cols}"


def _attention(prefix: str, heads: int, queries: int, keys: int, head_dim: int) -> _Rows:
    """Scaled dot-product attention's three kernels: Q·Kᵀ, the row softmax, P·V."""
    return [
        (f"{prefix}.matmul(q,k^T)", _bmm(heads, queries, keys, head_dim)),
        (f"{prefix}.softmax", _softmax(heads * queries, keys)),
        (f"{prefix}.matmul(p,v)", _bmm(heads, queries, head_dim, keys)),
    ]


def _resnet50() -> _Rows:
    rows = [
        ("conv1", _conv(3, 224, 64, 7, 2, 3)),
        ("maxpool", _pool(64, 112, 3, 2, 1)),
    ]
    # torchvision's Bottleneck (v1.5: the stride sits on the 3x3 conv)
    cin, h = 64, 56
    for stage, (width, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), 1):
        out = h // stride
        rows += [
            (f"layer{stage}.0.conv1", _conv(cin, h, width, 1)),
            (f"layer{stage}.0.conv2", _conv(width, h, width, 3, stride, 1)),
            (f"layer{stage}.0.conv3", _conv(width, out, 4 * width, 1)),
            (f"layer{stage}.0.downsample.0", _conv(cin, h, 4 * width, 1, stride)),
            (f"layer{stage}.1.conv1", _conv(4 * width, out, width, 1)),
            (f"layer{stage}.1.conv2", _conv(width, out, width, 3, 1, 1)),
        ]
        cin, h = 4 * width, out
    return [*rows, ("fc", _dense(1, 1000, 2048))]


def _resnext50() -> _Rows:
    rows = []
    cin, h = 64, 56
    for stage, (width, stride) in enumerate(((128, 1), (256, 2), (512, 2), (1024, 2)), 1):
        out, planes = h // stride, width // 2
        rows += [
            (f"layer{stage}.0.conv1", _conv(cin, h, width, 1)),
            (f"layer{stage}.0.conv2", _conv(width, h, width, 3, stride, 1, groups=32)),
            (f"layer{stage}.0.conv3", _conv(width, out, 4 * planes, 1)),
            (f"layer{stage}.1.conv2", _conv(width, out, width, 3, 1, 1, groups=32)),
        ]
        cin, h = 4 * planes, out
    return rows


def _mobilenet_v2() -> _Rows:
    rows = [
        ("features.0.0", _conv(3, 224, 32, 3, 2, 1)),
        ("features.1.conv.0.0", _dw(32, 112, 3)),
        ("features.1.conv.1", _conv(32, 112, 16, 1)),
    ]
    # (expansion t, out channels c, repeats n, first stride s), torchvision's table
    cin, h, index = 16, 112, 2
    for t, c, n, s in ((6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2)):
        for i in range(min(n, 2)):
            stride = s if i == 0 else 1
            hidden, out = cin * t, h // stride
            rows += [
                (f"features.{index + i}.conv.0.0", _conv(cin, h, hidden, 1)),
                (f"features.{index + i}.conv.1.0", _dw(hidden, h, 3, stride)),
                (f"features.{index + i}.conv.2", _conv(hidden, out, c, 1)),
            ]
            cin, h = c, out
        index += n
    return [
        *rows,
        ("features.17.conv.2", _conv(960, 7, 320, 1)),
        ("features.18.0", _conv(320, 7, 1280, 1)),
        ("classifier.1", _dense(1, 1000, 1280)),
    ]


def _efficientnet_b0() -> _Rows:
    rows = [
        ("features.0.0", _conv(3, 224, 32, 3, 2, 1)),
        ("features.1.0.block.0.0", _dw(32, 112, 3)),
        ("features.1.0.block.1.fc1", _conv(32, 1, 8, 1)),
        ("features.1.0.block.2.0", _conv(32, 112, 16, 1)),
    ]
    # (kernel, first stride, out channels), expansion 6, torchvision's MBConv table
    cin, h = 16, 112
    for stage, (k, s, c) in enumerate(((3, 2, 24), (5, 2, 40), (3, 2, 80), (5, 1, 112)), 2):
        for i in range(2):
            stride = s if i == 0 else 1
            hidden, out = 6 * cin, h // stride
            block = f"features.{stage}.{i}.block"
            rows += [
                (f"{block}.0.0", _conv(cin, h, hidden, 1)),
                (f"{block}.1.0", _dw(hidden, h, k, stride)),
                (f"{block}.2.fc1", _conv(hidden, 1, cin // 4, 1)),
                (f"{block}.3.0", _conv(hidden, out, c, 1)),
            ]
            cin, h = c, out
    return [
        *rows,
        ("features.6.0.block.1.0", _dw(672, 14, 5, 2)),
        ("features.6.0.block.3.0", _conv(672, 7, 192, 1)),
        ("features.6.1.block.0.0", _conv(192, 7, 1152, 1)),
        ("features.6.1.block.1.0", _dw(1152, 7, 5)),
        ("features.7.0.block.1.0", _dw(1152, 7, 3)),
        ("features.7.0.block.3.0", _conv(1152, 7, 320, 1)),
        ("features.8.0", _conv(320, 7, 1280, 1)),
        ("classifier.1", _dense(1, 1000, 1280)),
    ]


def _inception_v3() -> _Rows:
    return [
        ("Conv2d_1a_3x3.conv", _conv(3, 299, 32, 3, 2)),
        ("Conv2d_2a_3x3.conv", _conv(32, 149, 32, 3)),
        ("Conv2d_2b_3x3.conv", _conv(32, 147, 64, 3, 1, 1)),
        ("maxpool1", _pool(64, 147, 3, 2)),
        ("Conv2d_3b_1x1.conv", _conv(64, 73, 80, 1)),
        ("Conv2d_4a_3x3.conv", _conv(80, 73, 192, 3)),
        ("maxpool2", _pool(192, 71, 3, 2)),
        ("Mixed_5b.branch1x1.conv", _conv(192, 35, 64, 1)),
        ("Mixed_5b.branch5x5_1.conv", _conv(192, 35, 48, 1)),
        ("Mixed_5b.branch5x5_2.conv", _conv(48, 35, 64, 5, 1, 2)),
        ("Mixed_5b.branch3x3dbl_2.conv", _conv(64, 35, 96, 3, 1, 1)),
        ("Mixed_5b.branch3x3dbl_3.conv", _conv(96, 35, 96, 3, 1, 1)),
        ("Mixed_5b.branch_pool.conv", _conv(192, 35, 32, 1)),
        ("Mixed_5c.branch1x1.conv", _conv(256, 35, 64, 1)),
        ("Mixed_6a.branch3x3.conv", _conv(288, 35, 384, 3, 2)),
        ("Mixed_6a.branch3x3dbl_3.conv", _conv(96, 35, 96, 3, 2)),
        ("Mixed_6a.max_pool2d", _pool(288, 35, 3, 2)),
        ("Mixed_6b.branch1x1.conv", _conv(768, 17, 192, 1)),
        ("Mixed_6b.branch7x7_1.conv", _conv(768, 17, 128, 1)),
        ("Mixed_6b.branch7x7_2.conv", _conv(128, 17, 128, 1, s=7, w=23)),
        ("Mixed_6b.branch7x7_3.conv", _conv(128, 23, 192, 7, s=1, w=17)),
        ("Mixed_6e.branch7x7_2.conv", _conv(192, 17, 192, 1, s=7, w=23)),
        ("Mixed_7a.branch3x3_2.conv", _conv(192, 17, 320, 3, 2)),
        ("Mixed_7b.branch1x1.conv", _conv(1280, 8, 320, 1)),
        ("Mixed_7b.branch3x3_1.conv", _conv(1280, 8, 384, 1)),
        ("Mixed_7b.branch3x3_2a.conv", _conv(384, 8, 384, 1, s=3, w=10)),
        ("Mixed_7b.branch3x3dbl_1.conv", _conv(1280, 8, 448, 1)),
        ("Mixed_7b.branch3x3dbl_2.conv", _conv(448, 8, 384, 3, 1, 1)),
        ("Mixed_7c.branch1x1.conv", _conv(2048, 8, 320, 1)),
        ("fc", _dense(1, 1000, 2048)),
    ]


def _vit_b16() -> _Rows:
    layer = "encoder.layers.encoder_layer_0"
    return [
        ("conv_proj", _conv(3, 224, 768, 16, 16)),
        (f"{layer}.ln_1", _ln(197, 768)),
        (f"{layer}.self_attention.in_proj", _dense(197, 2304, 768)),
        *_attention(f"{layer}.self_attention", 12, 197, 197, 64),
        (f"{layer}.self_attention.out_proj", _dense(197, 768, 768)),
        (f"{layer}.mlp.0", _dense(197, 3072, 768, "bias+gelu")),
        (f"{layer}.mlp.3", _dense(197, 768, 3072)),
        ("heads.head", _dense(1, 1000, 768)),
    ]


def _bert_base() -> _Rows:
    rows = []
    for seq in (128, 384):
        at = f"@seq{seq}"
        layer = "encoder.layer.0"
        rows += [
            (f"embeddings.LayerNorm{at}", _ln(seq, 768)),
            (f"{layer}.attention.self.query{at}", _dense(seq, 768, 768)),
            *((n + at, s) for n, s in _attention(f"{layer}.attention.self", 12, seq, seq, 64)),
            (f"{layer}.intermediate.dense{at}", _dense(seq, 3072, 768, "bias+gelu")),
            (f"{layer}.output.dense{at}", _dense(seq, 768, 3072)),
        ]
    return [*rows, ("pooler.dense", _dense(1, 768, 768))]


def _gpt2_small() -> _Rows:
    rows = []
    # a 256-token prompt, then one token attending to the 256 cached ones and itself
    for at, queries, keys in (("@prefill256", 256, 256), ("@decode257", 1, 257)):
        rows += [
            (f"h.0.ln_1{at}", _ln(queries, 768)),
            (f"h.0.attn.c_attn{at}", _matmul(queries, 2304, 768)),
            *((n + at, s) for n, s in _attention("h.0.attn", 12, queries, keys, 64)),
            (f"h.0.attn.c_proj{at}", _matmul(queries, 768, 768)),
            (f"h.0.mlp.c_fc{at}", _matmul(queries, 3072, 768, "bias+gelu")),
            (f"h.0.mlp.c_proj{at}", _matmul(queries, 768, 3072)),
        ]
    return [*rows, ("lm_head@decode257", _dense(1, 50257, 768))]


def _lstm_lm() -> _Rows:
    rows = []
    for config, hidden in (("medium", 650), ("large", 1500)):
        rows += [
            # the input projection of a 35-step window at once; the recurrence one step at a time
            (f"rnn.weight_ih_l0@{config}", _dense(35, 4 * hidden, hidden)),
            (f"rnn.weight_hh_l0@{config}", _dense(1, 4 * hidden, hidden)),
            (f"decoder@{config}", _dense(35, 10000, hidden)),
        ]
    return [*rows, ("log_softmax", _softmax(35, 10000))]


def _dlrm() -> _Rows:
    return [
        ("bot_l.0", _dense(1, 512, 13, "bias+relu")),
        ("bot_l.2", _dense(1, 256, 512, "bias+relu")),
        ("bot_l.4", _dense(1, 128, 256, "bias+relu")),
        # pairwise dot products of the 26 embeddings and the dense feature: T·Tᵀ
        ("interact_features.bmm", _bmm(1, 27, 27, 128)),
        ("top_l.0", _dense(1, 1024, 479, "bias+relu")),
        ("top_l.2", _dense(1, 1024, 1024, "bias+relu")),
        ("top_l.4", _dense(1, 512, 1024, "bias+relu")),
        ("top_l.6", _dense(1, 256, 512, "bias+relu")),
        ("top_l.8", _dense(1, 1, 256)),
    ]


def _yolov5s() -> _Rows:
    rows = [
        ("model.0.conv", _conv(3, 640, 32, 6, 2, 2)),
        ("model.1.conv", _conv(32, 320, 64, 3, 2, 1)),
    ]
    # C3 blocks: (index, in=out channels, grid), each followed by a strided 3x3 Conv
    for index, c, h in ((2, 64, 160), (4, 128, 80), (6, 256, 40), (8, 512, 20)):
        rows += [
            (f"model.{index}.cv1.conv", _conv(c, h, c // 2, 1)),
            (f"model.{index}.m.0.cv1.conv", _conv(c // 2, h, c // 2, 1)),
            (f"model.{index}.m.0.cv2.conv", _conv(c // 2, h, c // 2, 3, 1, 1)),
            (f"model.{index}.cv3.conv", _conv(c, h, c, 1)),
        ]
        if index < 8:
            rows.append((f"model.{index + 1}.conv", _conv(c, h, 2 * c, 3, 2, 1)))
    return [
        *rows,
        ("model.9.m", _pool(256, 20, 5, 1, 2)),
        ("model.9.cv2.conv", _conv(1024, 20, 512, 1)),
        ("model.24.m.0", _conv(128, 80, 255, 1)),
        ("model.24.m.1", _conv(256, 40, 255, 1)),
        ("model.24.m.2", _conv(512, 20, 255, 1)),
    ]


def _shufflenet_v2() -> _Rows:
    rows = [("conv1.0", _conv(3, 224, 24, 3, 2, 1)), ("maxpool", _pool(24, 112, 3, 2, 1))]
    cin, h = 24, 56
    for stage, c in ((2, 116), (3, 232), (4, 464)):
        half, out = c // 2, h // 2
        rows += [
            (f"stage{stage}.0.branch1.0", _dw(cin, h, 3, 2)),
            (f"stage{stage}.0.branch1.2", _conv(cin, out, half, 1)),
            (f"stage{stage}.0.branch2.0", _conv(cin, h, half, 1)),
            (f"stage{stage}.0.branch2.3", _dw(half, h, 3, 2)),
            (f"stage{stage}.1.branch2.0", _conv(half, out, half, 1)),
            (f"stage{stage}.1.branch2.3", _dw(half, out, 3)),
        ]
        cin, h = c, out
    return [*rows, ("conv5.0", _conv(464, 7, 1024, 1)), ("fc", _dense(1, 1000, 1024))]


def _densenet121() -> _Rows:
    rows = [
        ("features.conv0", _conv(3, 224, 64, 7, 2, 3)),
        ("features.pool0", _pool(64, 112, 3, 2, 1)),
    ]
    # growth 32, bottleneck 128; layer i of a block sees in + 32*(i-1) channels
    cin, h = 64, 56
    for block, n in enumerate((6, 12, 24, 16), 1):
        for i in sorted({1, n // 2, n}):
            rows.append(
                (
                    f"features.denseblock{block}.denselayer{i}.conv1",
                    _conv(cin + 32 * (i - 1), h, 128, 1),
                )
            )
        rows.append((f"features.denseblock{block}.denselayer1.conv2", _conv(128, h, 32, 3, 1, 1)))
        cin += 32 * n
        if block < 4:
            rows.append((f"features.transition{block}.conv", _conv(cin, h, cin // 2, 1)))
            cin, h = cin // 2, h // 2
    return [*rows, ("classifier", _dense(1, 1000, 1024))]


def _convnext_tiny() -> _Rows:
    rows = [
        ("features.0.0", _conv(3, 224, 96, 4, 4)),
        ("features.0.1", _ln(56 * 56, 96)),
    ]
    h = 56
    for stage, dim in enumerate((96, 192, 384, 768)):
        if stage:
            rows.append((f"features.{2 * stage}.1", _conv(dim // 2, 2 * h, dim, 2, 2)))
        block = f"features.{2 * stage + 1}.0.block"
        rows += [
            (f"{block}.0", _dw(dim, h, 7)),
            (f"{block}.2", _ln(h * h, dim)),
            (f"{block}.3", _dense(h * h, 4 * dim, dim, "bias+gelu")),
            (f"{block}.5", _dense(h * h, dim, 4 * dim)),
        ]
        h //= 2
    return [*rows, ("classifier.0", _ln(1, 768)), ("classifier.2", _dense(1, 1000, 768))]


def _swin_t() -> _Rows:
    rows = [("features.0.0", _conv(3, 224, 96, 4, 4)), ("features.0.2", _ln(56 * 56, 96))]
    # 7x7 windows of 49 tokens, 32 channels per head; heads 3, 6, 12, 24 on 56, 28, 14, 7 grids
    h = 56
    for stage, dim in enumerate((96, 192, 384, 768)):
        block = f"features.{2 * stage + 1}.0"
        windows, heads = (h // 7) ** 2, dim // 32
        rows += [
            (f"{block}.attn.qkv", _dense(h * h, 3 * dim, dim)),
            *_attention(f"{block}.attn", windows * heads, 49, 49, 32),
            (f"{block}.mlp.0", _dense(h * h, 4 * dim, dim, "bias+gelu")),
        ]
        h //= 2
    return rows


def _alexnet() -> _Rows:
    return [
        ("features.0", _conv(3, 224, 64, 11, 4, 2)),
        ("features.2", _pool(64, 55, 3, 2)),
        ("features.3", _conv(64, 27, 192, 5, 1, 2)),
        ("features.5", _pool(192, 27, 3, 2)),
        ("features.6", _conv(192, 13, 384, 3, 1, 1)),
        ("features.8", _conv(384, 13, 256, 3, 1, 1)),
        ("features.12", _pool(256, 13, 3, 2)),
        ("classifier.1", _dense(1, 4096, 9216)),
        ("classifier.4", _dense(1, 4096, 4096)),
        ("classifier.6", _dense(1, 1000, 4096)),
    ]


def _family(name: str, rows: Iterable[tuple[str, str]]) -> tuple[Layer, ...]:
    """The family's layers, each spec once (under the first layer that has it)."""
    seen: set[str] = set()
    kept = []
    for layer, spec in rows:
        if spec not in seen:
            seen.add(spec)
            kept.append(Layer(name, layer, spec))
    return tuple(kept)


FAMILIES: dict[str, tuple[Layer, ...]] = {
    name: _family(name, build())
    for name, build in (
        ("resnet50", _resnet50),
        ("resnext50_32x4d", _resnext50),
        ("mobilenet_v2", _mobilenet_v2),
        ("efficientnet_b0", _efficientnet_b0),
        ("inception_v3", _inception_v3),
        ("shufflenet_v2", _shufflenet_v2),
        ("densenet121", _densenet121),
        ("convnext_tiny", _convnext_tiny),
        ("alexnet", _alexnet),
        ("yolov5s", _yolov5s),
        ("vit_b16", _vit_b16),
        ("swin_t", _swin_t),
        ("bert_base", _bert_base),
        ("gpt2_small", _gpt2_small),
        ("lstm_lm", _lstm_lm),
        ("dlrm", _dlrm),
    )
}
"""Each network's layers by family name, in the order the network runs them."""


def layers(families: Iterable[str] | None = None) -> list[Layer]:
    """The layers of the named families (all of them by default), in catalog order."""
    names = list(FAMILIES) if families is None else list(families)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise SpecError(
            f"unknown network family {', '.join(map(repr, unknown))}; known: {', '.join(FAMILIES)}"
        )
    return [layer for name in names for layer in FAMILIES[name]]


def by_key() -> dict[str, Layer]:
    """Every layer by ``"family/name"``, the label benchmarks and datasets print."""
    return {f"{layer.family}/{layer.name}": layer for layer in layers()}
