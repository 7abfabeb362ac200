from __future__ import annotations

import pytest

from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from leanseg.core.model.config import config_from_dict, config_to_dict

from .model_tester import SegmentationModelTester


class TestMobileUNet(SegmentationModelTester):
    @staticmethod
    def make(num_classes: int, in_channels: int) -> MobileUNet:
        return MobileUNet(MobileUNetConfig(num_classes=num_classes, in_channels=in_channels, width=0.35))


class TestPlainUNet(SegmentationModelTester):
    @staticmethod
    def make(num_classes: int, in_channels: int) -> PlainUNet:
        return PlainUNet(PlainUNetConfig(num_classes=num_classes, in_channels=in_channels, base_channels=8))


def test_skip_taps_come_from_block_metadata() -> None:
    encoder = MobileUNet(MobileUNetConfig()).encoder
    assert encoder.out_channels == [16, 24, 32, 96, 320]


@pytest.mark.parametrize("config", [MobileUNetConfig(width=0.5), MobileUNetConfig(context_dilations=(2, 4)),
                                    PlainUNetConfig(depth=3)])
def test_config_round_trip(config: object) -> None:
    assert config_from_dict(config_to_dict(config)) == config  # type: ignore[arg-type]


def test_a_field_added_later_is_left_out_at_its_default() -> None:
    """A checkpoint of a model without a context module reads the same as before the option existed."""
    assert "context_dilations" not in config_to_dict(MobileUNetConfig())
    assert config_to_dict(MobileUNetConfig(context_dilations=(2,)))["context_dilations"] == (2,)


def test_config_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match="num_classes must be in 1..255"):
        MobileUNetConfig(num_classes=0)
    with pytest.raises(ValueError, match="in_channels must be 1"):
        PlainUNetConfig(in_channels=2)
    with pytest.raises(ValueError, match="unknown model kind 'ResNet'"):
        config_from_dict({"kind": "ResNet"})
