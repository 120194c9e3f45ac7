"""The five models of issue 16 in plain PyTorch (no torchvision, no downloads), with seeded random
weights in eval mode, and their ONNX export by either of torch's exporters.

    from torch_models import MODELS, build, export_onnx
    module, inputs = build("resnet18")
    proto = export_onnx(module, inputs, "torchscript")  # or "dynamo"

Every model takes batch 1. Batch-norm statistics are random too (a freshly initialised network
has mean 0, variance 1: folding them would be tested on identities only).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import onnx
import torch
import torch.nn.functional as F
from torch import nn

OPSET = 17
"""The torchscript exporter's opset; the dynamo exporter picks its own (18 or later)."""
EXPORTERS = ("torchscript", "dynamo")


def _conv_bn(c: int, k: int, size: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(c, k, size, stride, (size - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(k),
    ]


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: two 3x3 conv-bn, a projected shortcut when the shape
    changes, ReLU after the residual add."""

    def __init__(self, c: int, k: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(c, k, 3, stride), nn.ReLU(), *_conv_bn(k, k, 3))
        self.down = (
            nn.Sequential(*_conv_bn(c, k, 1, stride)) if stride != 1 or c != k else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.down(x))


class ResNet18(nn.Module):
    """torchvision's resnet18: 7x7 stem, max pool, four stages of two basic blocks, global
    average pool, a 1000-way classifier."""

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [*_conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        c = 64
        for k, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(c, k, stride), BasicBlock(k, k, 1)]
            c = k
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.fc(torch.flatten(x, 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion (unless the ratio is 1), 3x3 depthwise, 1x1
    projection without activation; a residual add when the shape is kept."""

    def __init__(self, c: int, k: int, stride: int, expand: int):
        super().__init__()
        mid = c * expand
        layers: list[nn.Module] = [*_conv_bn(c, mid, 1), nn.ReLU6()] if expand != 1 else []
        layers += [*_conv_bn(mid, mid, 3, stride, groups=mid), nn.ReLU6(), *_conv_bn(mid, k, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c == k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """torchvision's mobilenet_v2 (width 1.0): stem, 17 inverted residuals, 1x1 conv to 1280,
    global average pool, dropout, a 1000-way classifier."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2))
    SETTINGS += ((6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [*_conv_bn(3, 32, 3, 2), nn.ReLU6()]
        c = 32
        for expand, k, repeats, stride in self.SETTINGS:
            for r in range(repeats):
                layers.append(InvertedResidual(c, k, stride if r == 0 else 1, expand))
                c = k
        layers += [*_conv_bn(c, 1280, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class BertLayer(nn.Module):
    """One BERT-base encoder layer as Hugging Face writes it: self-attention with heads split
    by view/permute, output projection, residual and LayerNorm, a GELU (erf) feed-forward,
    residual and LayerNorm."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (self._split(f(x)) for f in (self.query, self.key, self.value))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        ctx = self.dropout(scores.softmax(dim=-1)) @ v
        ctx = ctx.permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(*ctx.shape[:-2], self.heads * self.head_dim)
        h = self.attn_norm(self.dropout(self.attn_out(ctx)) + x)
        f = self.dropout(self.output(F.gelu(self.intermediate(h))))
        return self.out_norm(f + h)


class AtariDQN(nn.Module):
    """The Nature DQN (Mnih et al. 2015): four stacked 84x84 frames scaled from 0-255, three
    convolutions, a 512-unit hidden layer, one Q-value per action."""

    def __init__(self, actions: int = 18):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(4, 32, 8, 4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, 1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 512),
            nn.ReLU(),
            nn.Linear(512, actions),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x / 255.0)


class LstmLM(nn.Module):
    """The medium word-level LSTM language model (Zaremba et al. 2014; PyTorch's
    word_language_model example): embedding, two stacked LSTMs, a decoder over the vocabulary;
    ids are [seq, batch], the states start at zero."""

    def __init__(self, vocab: int = 10000, dim: int = 650, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, layers, dropout=0.5)
        self.decoder = nn.Linear(dim, vocab)
        self.dropout = nn.Dropout(0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(self.dropout(self.embed(ids)))
        return self.decoder(self.dropout(y))


def _images(channels: int, size: int, scale: float = 1.0) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.rand(1, channels, size, size, generator=g) * scale,)


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[torch.Generator], tuple]]] = {
    "resnet18": (ResNet18, _images(3, 224)),
    "mobilenet_v2": (MobileNetV2, _images(3, 224)),
    "bert_layer": (BertLayer, lambda g: (torch.randn(1, 128, 768, generator=g),)),
    "dqn": (AtariDQN, _images(4, 84, 255.0)),
    "lstm_lm": (LstmLM, lambda g: (torch.randint(0, 10000, (35, 1), generator=g),)),
}
"""Each model's constructor and its batch-1 example inputs."""


def _randomize_norms(module: nn.Module, g: torch.Generator) -> None:
    """Random norm scales, shifts and statistics: fresh ones are identities."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d | nn.LayerNorm):
            n = m.weight.shape
            with torch.no_grad():
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
            if isinstance(m, nn.BatchNorm2d):
                assert m.running_mean is not None and m.running_var is not None
                m.running_mean.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Model ``name`` (a key of MODELS) with seeded random weights in eval mode, and its
    example inputs."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; models: {', '.join(MODELS)}")
    make, inputs = MODELS[name]
    torch.manual_seed(seed)
    module = make()
    g = torch.Generator().manual_seed(seed)
    _randomize_norms(module, g)
    return module.eval(), inputs(g)


def input_names(module: nn.Module) -> list[str]:
    """The ONNX input names ``export_onnx`` gives the model's inputs."""
    return ["ids"] if isinstance(module, LstmLM) else ["input"]


def export_onnx(
    module: nn.Module, inputs: tuple[torch.Tensor, ...], exporter: str
) -> onnx.ModelProto:
    """``module`` as an onnx.ModelProto by ``torch.onnx.export`` (``exporter``: torchscript,
    ``dynamo=False``, or dynamo, which needs onnxscript); static shapes, batch 1."""
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}; exporters: {', '.join(EXPORTERS)}")
    names = input_names(module)
    with torch.no_grad():
        if exporter == "dynamo":
            program = torch.onnx.export(
                module,
                inputs,
                input_names=names,
                output_names=["output"],
                dynamo=True,
                verbose=False,
            )
            return program.model_proto
        buffer = io.BytesIO()
        torch.onnx.export(
            module,
            inputs,
            buffer,
            input_names=names,
            output_names=["output"],
            opset_version=OPSET,
            dynamo=False,
        )
    return onnx.load_model_from_string(buffer.getvalue())
