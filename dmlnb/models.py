"""Embedding networks: a trunk that maps images to features, and a head that maps features to
the embedding.

``EmbeddingNet(trunk, feature_dim, embedding_dim)`` is the one model class every notebook trains:

    x (B, C, H, W) --trunk--> features (B, F) --head (linear F->D)--> embedding (B, D) [--L2-->]

``model.features(x)`` exposes the penultimate layer (the trunk output), which one paper
(Do et al., Table 2) evaluates beside the last layer. Trunks:

* ``convnet``: the 4-block (conv3x3-BN-ReLU-maxpool) 64-channel network of the few-shot /
  Omniglot literature, pooling only while the feature map is at least 2x2 so it
  also fits 8x8 digits.
* ``ssdml-mnist`` / ``ssdml-cifar``: the MNIST and CIFAR-10 networks of Dutta et al. (AAAI 2021),
  whose 128-d / 64-d L2-normalised output feeds their metric layer ``L``.
* ``googlenet``, ``resnet18``, ``resnet50``, ``vgg16``: torchvision backbones, ImageNet weights
  with ``pretrained=True`` (downloaded by torchvision; a clear error when offline).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.profiles import MODELS, TrainConfig

__all__ = [
    "EmbeddingNet",
    "ConvNet",
    "SSDMLMnistNet",
    "SSDMLCifarNet",
    "build_model",
    "configured_model",
    "in_training_format",
    "available_models",
]


class ConvNet(nn.Module):
    """``blocks`` x (conv3x3 -> BN -> ReLU -> maxpool2), global average pool -> ``(B, width)``;
    computed as conv3x3 -> BN -> maxpool2 -> ReLU (below).

    A block pools only while the spatial size is >= 2, so 8x8 digits and 28x28 Omniglot both work.

    Each block applies the max-pool before the ReLU: ``maxpool(relu(x)) == relu(maxpool(x))``
    exactly (ReLU is monotone, a maximum of floats is exact), and the gradient is the same too
    (the window's first maximum receives it, or nothing when that maximum is <= 0), so this is the
    conv-BN-ReLU-pool network bit for bit (a test compares the two orders), with the ReLU and its
    backward on a quarter of the elements: a default-profile step (128 images of 28x28) runs
    faster on a CPU, since the first block's (128, 64, 28, 28) activations do not fit the cache and
    every pass over them is paid at memory speed (``python benchmarks/book.py --measure`` times
    both orders; ``benchmarks/results/book_cpu.txt``: 1,383 against 1,244 img/s, two threads).
    """

    def __init__(self, in_channels: int, image_size: int, width: int = 64, blocks: int = 4) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        size, channels = image_size, in_channels
        for _ in range(blocks):
            layers += [nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)]
            if size >= 2:
                layers.append(nn.MaxPool2d(2))
                size //= 2
            layers.append(nn.ReLU(inplace=True))
            channels = width
        self.body = nn.Sequential(*layers)
        self.out_dim = width

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(self.body(x), 1).flatten(1)  # (B, width)


class SSDMLMnistNet(nn.Module):
    """Dutta et al. (2021) MNIST/Fashion network: Conv(5x5,20) -> maxpool -> Conv(5x5,50) -> maxpool
    -> Conv(4x4,500) -> ReLU -> FC(500 x 128) -> L2. Input (B, 1, 28, 28), output (B, 128)."""

    out_dim = 128

    def __init__(self, in_channels: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, 20, 5),
            nn.MaxPool2d(2),  # 28 -> 24 -> 12
            nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2),  # 12 -> 8 -> 4
            nn.Conv2d(50, 500, 4),
            nn.ReLU(inplace=True),  # 4 -> 1
        )
        self.fc = nn.Linear(500, 128)

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.fc(self.body(x).flatten(1)), dim=1)  # (B, 128)


class SSDMLCifarNet(nn.Module):
    """Dutta et al. (2021) CIFAR-10 network: Conv(5x5,32) -> maxpool -> ReLU -> Conv(5x5,32) -> ReLU
    -> avgpool -> Conv(5x5,64) -> ReLU -> avgpool -> Conv(4x4,64) -> ReLU -> L2.
    Input (B, 3, 32, 32) ('same' padding as in MatConvNet's CIFAR net), output (B, 64)."""

    out_dim = 64

    def __init__(self, in_channels: int = 3) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, 32, 5, padding=2),
            nn.MaxPool2d(2),
            nn.ReLU(inplace=True),  # 16
            nn.Conv2d(32, 32, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(2),  # 8
            nn.Conv2d(32, 64, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(2),  # 4
            nn.Conv2d(64, 64, 4),
            nn.ReLU(inplace=True),  # 1
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.body(x).flatten(1), dim=1)  # (B, 64)


class EmbeddingNet(nn.Module):
    """Trunk + linear embedding head, optionally L2-normalised.

    Args:
        trunk: maps ``(B, C, H, W)`` to features ``(B, feature_dim)``.
        feature_dim: trunk output size F.
        embedding_dim: embedding size D.
        normalize: L2-normalise the embedding (most DML losses expect it; some normalise inside).
        bias: bias of the head (the SSDML metric layer ``L`` has none).
    """

    def __init__(
        self,
        trunk: nn.Module,
        feature_dim: int,
        embedding_dim: int,
        normalize: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = nn.Linear(feature_dim, embedding_dim, bias=bias)
        self.normalize = normalize
        self.feature_dim = feature_dim
        self.embedding_dim = embedding_dim

    def features(self, x: Tensor) -> Tensor:
        """The penultimate layer: trunk output ``(B, F)``."""
        return self.trunk(x)

    def forward(self, x: Tensor) -> Tensor:
        z = self.head(self.features(x))  # (B, D)
        return F.normalize(z, dim=1) if self.normalize else z


def _torchvision_trunk(name: str, pretrained: bool) -> tuple[nn.Module, int]:
    import torchvision.models as tvm

    builders: dict[str, Callable[..., nn.Module]] = {
        "googlenet": tvm.googlenet,
        "resnet18": tvm.resnet18,
        "resnet50": tvm.resnet50,
        "vgg16": tvm.vgg16,
    }
    kwargs: dict = {"weights": "DEFAULT" if pretrained else None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=not pretrained)
        if pretrained:
            kwargs["transform_input"] = False
    try:
        net = builders[name](**kwargs)
    except (OSError, RuntimeError) as err:  # URLError is an OSError
        raise RuntimeError(
            f"could not load ImageNet weights for {name!r} ({err}). torchvision downloads them to "
            f"$TORCH_HOME/hub/checkpoints (default ~/.cache/torch); on an offline machine copy the "
            "weight file there first, or build the model with pretrained=False."
        ) from err
    if name == "vgg16":
        feature_dim = net.classifier[-1].in_features
        net.classifier[-1] = nn.Identity()  # keep fc6/fc7: penultimate = fc7 (4096)
    else:
        feature_dim = net.fc.in_features
        net.fc = nn.Identity()
    return net, feature_dim


def available_models() -> list[str]:
    """Names accepted by :func:`build_model` (:data:`dmlnb.profiles.MODELS`)."""
    return list(MODELS)


def build_model(
    name: str,
    input_shape: tuple[int, int, int],
    embedding_dim: int,
    normalize: bool = False,
    pretrained: bool = False,
    width: int = 64,
) -> EmbeddingNet:
    """Build an :class:`EmbeddingNet` by trunk name for inputs of shape ``(C, H, W)``."""
    channels, height, _ = input_shape
    if name == "convnet":
        trunk: nn.Module = ConvNet(channels, height, width=width)
        feature_dim = trunk.out_dim
    elif name == "ssdml-mnist":
        trunk, feature_dim = SSDMLMnistNet(channels), SSDMLMnistNet.out_dim
    elif name == "ssdml-cifar":
        trunk, feature_dim = SSDMLCifarNet(channels), SSDMLCifarNet.out_dim
    elif name in ("googlenet", "resnet18", "resnet50", "vgg16"):
        if channels != 3:
            raise ValueError(f"{name} expects 3-channel images, the dataset has {channels}")
        trunk, feature_dim = _torchvision_trunk(name, pretrained)
    else:
        raise ValueError(f"unknown model {name!r}; choose one of {available_models()}")
    if pretrained and name not in ("googlenet", "resnet18", "resnet50", "vgg16"):
        raise ValueError(f"pretrained weights exist only for torchvision backbones, not {name!r}")
    bias = not name.startswith("ssdml")
    return EmbeddingNet(trunk, feature_dim, embedding_dim, normalize=normalize, bias=bias)


def configured_model(config: TrainConfig, input_shape: tuple[int, int, int]) -> EmbeddingNet:
    """The model a run of ``config`` trains, as :func:`dmlnb.training.fit` builds it: its
    ``model``, ``embedding_dim``, ``normalize``, ``pretrained`` and ``width``, for inputs
    ``(C, H, W)``, initialised after ``torch.manual_seed(config.seed)`` (load a checkpoint's
    ``"model"`` state into it to get the trained network back), in the channels_last memory format
    when ``config.channels_last`` (as :func:`dmlnb.training.train` trains it on a CPU or GPU)."""
    torch.manual_seed(config.seed)
    model = build_model(
        config.model,
        input_shape,
        config.embedding_dim,
        normalize=config.normalize,
        pretrained=config.pretrained,
        width=config.width,
    )
    return in_training_format(model, config)


def in_training_format(model: nn.Module, config: TrainConfig) -> nn.Module:
    """``model`` in the memory format :func:`dmlnb.training.train` gives it for ``config``
    (channels_last when ``config.channels_last``), converted in place and returned.

    A network evaluated outside the loop (reloaded weights, a network at initialisation) then
    embeds exactly as the loop's evaluations do: convolutions in another memory format round
    differently, enough to flip near-tied neighbours (the SSDML chapter's networks at
    initialisation, rebuilt in NCHW, were 0.7 pts of R@2 off their runs' Initial row
    on digits, seed 0)."""
    return model.to(memory_format=torch.channels_last) if config.channels_last else model
