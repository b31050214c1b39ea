import copy
import urllib.error

import pytest
import torch
from scripts import benchmark_script

from dmlnb.models import ConvNet, available_models, build_model


@pytest.mark.parametrize(
    "name,shape,feat",
    [
        ("convnet", (1, 8, 8), 64),
        ("convnet", (1, 28, 28), 64),
        ("ssdml-mnist", (1, 28, 28), 128),
        ("ssdml-cifar", (3, 32, 32), 64),
        ("resnet18", (3, 32, 32), 512),
    ],
)
def test_shapes_and_penultimate_layer(name, shape, feat):
    torch.manual_seed(0)
    model = build_model(name, shape, embedding_dim=12, normalize=True).eval()
    x = torch.randn(3, *shape)
    z = model(x)
    assert z.shape == (3, 12)
    torch.testing.assert_close(z.norm(dim=1), torch.ones(3))
    f = model.features(x)
    assert f.shape == (3, feat)
    # the embedding is the head applied to the penultimate layer
    torch.testing.assert_close(torch.nn.functional.normalize(model.head(f), dim=1), z)


@pytest.mark.parametrize("size", [8, 28])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_convnet_pools_before_relu_bit_for_bit_as_the_relu_then_pool_network(
    size, memory_format, monkeypatch
):
    # the reference: the same modules in the literature's order conv-BN-ReLU-maxpool, as the step
    # benchmark times it
    torch.manual_seed(0)
    net = ConvNet(1, size).to(memory_format=memory_format).train()
    reference = copy.deepcopy(net)
    benchmark_script("book", monkeypatch).relu_before_pool(reference)
    kinds = [type(m).__name__ for m in reference.body][:4]
    assert kinds == ["Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"]
    assert [type(m).__name__ for m in net.body][:4] == [
        "Conv2d",
        "BatchNorm2d",
        "MaxPool2d",
        "ReLU",
    ]
    x = torch.randn(16, 1, size, size).contiguous(memory_format=memory_format)
    outputs, grads = [], []
    for model in (net, reference):
        out = model(x)  # (16, 64)
        (out * torch.arange(64.0)).sum().backward()
        outputs.append(out.detach())
        grads.append([p.grad for p in model.parameters()])
    assert torch.equal(outputs[0], outputs[1])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    for a, b in zip(net.modules(), reference.modules()):  # the BN running statistics too
        if isinstance(a, torch.nn.BatchNorm2d):
            assert torch.equal(a.running_mean, b.running_mean) and torch.equal(
                a.running_var, b.running_var
            )


def test_ssdml_trunks_are_l2_normalised_and_metric_layer_has_no_bias():
    model = build_model("ssdml-mnist", (1, 28, 28), embedding_dim=64)
    f = model.features(torch.randn(4, 1, 28, 28))
    torch.testing.assert_close(f.norm(dim=1), torch.ones(4))
    assert model.head.bias is None


def test_unknown_model_and_bad_channels():
    with pytest.raises(ValueError, match="unknown model.*convnet"):
        build_model("alexnet", (3, 32, 32), 8)
    with pytest.raises(ValueError, match="3-channel"):
        build_model("resnet18", (1, 28, 28), 8)
    with pytest.raises(ValueError, match="pretrained"):
        build_model("convnet", (1, 28, 28), 8, pretrained=True)
    assert "resnet50" in available_models()


def test_pretrained_offline_gives_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    with pytest.raises(RuntimeError, match="hub/checkpoints.*pretrained=False"):
        build_model("resnet18", (3, 32, 32), 8, pretrained=True)
