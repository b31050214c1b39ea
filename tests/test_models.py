import urllib.error

import pytest
import torch

from dmlnb.models import available_models, build_model


@pytest.mark.parametrize(
    "name,shape,feat",
    [("convnet", (1, 8, 8), 64), ("convnet", (1, 28, 28), 64), ("ssdml-mnist", (1, 28, 28), 128),
     ("ssdml-cifar", (3, 32, 32), 64), ("resnet18", (3, 32, 32), 512)],
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
