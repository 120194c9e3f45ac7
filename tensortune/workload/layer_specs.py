"""Workload spec strings of network layers, and the rows the network catalogs list.

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

Rows = list[tuple[str, str]]
"""(layer name, spec) pairs, as each family's builder lists them."""


def conv(
    c: int, h: int, k: int, r: int, stride: int = 1, pad: int = 0, groups: int = 1, **kw: int
) -> str:
    """A square-input conv2d spec (``W`` and ``S`` default to ``H`` and ``R``)."""
    w, s = kw.get("w", h), kw.get("s", r)
    spec = f"conv2d:C={c},H={h},W={w},K={k},R={r},S={s}"
    spec += f",stride={stride}" if stride != 1 else ""
    spec += f",pad={pad}" if pad else ""
    return spec + (f",groups={groups}" if groups != 1 else "")


def dw(c: int, h: int, r: int, stride: int = 1) -> str:
    """A depthwise conv with 'same' padding, as all the catalogued networks use."""
    spec = f"depthwise_conv2d:C={c},H={h},W={h},R={r},S={r},pad={r // 2}"
    return spec + (f",stride={stride}" if stride != 1 else "")


def pool(c: int, h: int, r: int, stride: int, pad: int = 0) -> str:
    return f"maxpool2d:C={c},H={h},W={h},R={r},S={r},stride={stride}" + (
        f",pad={pad}" if pad else ""
    )


def dense(m: int, n: int, k: int, epilogue: str = "") -> str:
    return f"dense:M={m},N={n},K={k}" + (f",epilogue={epilogue}" if epilogue else "")


def matmul(m: int, n: int, k: int, epilogue: str = "") -> str:
    return f"matmul:M={m},N={n},K={k}" + (f",epilogue={epilogue}" if epilogue else "")


def bmm(b: int, m: int, n: int, k: int) -> str:
    return f"batch_matmul:B={b},M={m},N={n},K={k}"


def softmax(rows: int, cols: int) -> str:
    return f"softmax:rows={rows},cols={cols}"


def ln(rows: int, cols: int) -> str:
    return f"layernorm:rows={rows},cols={cols}"


def attention(prefix: str, heads: int, queries: int, keys: int, head_dim: int) -> Rows:
    """Scaled dot-product attention's three kernels: Q·Kᵀ, the row softmax, P·V."""
    return [
        (f"{prefix}.matmul(q,k^T)", bmm(heads, queries, keys, head_dim)),
        (f"{prefix}.softmax", softmax(heads * queries, keys)),
        (f"{prefix}.matmul(p,v)", bmm(heads, queries, head_dim, keys)),
    ]
