"""More public architectures for the engine, built like ../shared/zoo/build.py (random weights, .pt2 + .onnx +
card) in the zoo's venv, one at a time: a model whose build or ONNX export fails is reported and skipped.

    .venv-zoo/bin/python scripts/build_more_zoo.py out/zoo_more                 # every model below
    .venv-zoo/bin/python scripts/build_more_zoo.py out/zoo_more NAME [NAME ...]
    .venv/bin/leanseg bench --zoo out/zoo_more --zoo-configs eager,fp32 --size 512 --repeats 1

Encoders nobody here wrote: EfficientNet (smp's port with static "same" padding, and timm's), timm's
MobileNetV3, RegNetY (SE), ConvNeXt (LayerNorm2d, 7x7 depthwise), HRNet, MobileOne, Res2Net and CSPResNet
(channel splits), ResNeSt (split attention), GhostNet (channel slices), DLA; decoders: U-Net with scSE
attention, UPerNet, DeepLabV3, torchvision's FCN and DeepLabV3 on ResNet-50.
"""
import importlib.util
import sys
from pathlib import Path

ZOO_BUILD = Path(__file__).resolve().parents[2] / "shared" / "zoo" / "build.py"
spec = importlib.util.spec_from_file_location("zoo_build", ZOO_BUILD)
zoo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(zoo)


def unet(encoder, **options):
    import segmentation_models_pytorch as smp
    return lambda: smp.Unet(encoder, encoder_weights=None, classes=zoo.CLASSES, **options)


def smp_model(kind, encoder):
    import segmentation_models_pytorch as smp
    return lambda: getattr(smp, kind)(encoder, encoder_weights=None, classes=zoo.CLASSES)


def torchvision_model(name):
    def build():
        from torchvision.models import segmentation
        return zoo.Unwrap(getattr(segmentation, name)(weights=None, weights_backbone=None, num_classes=zoo.CLASSES,
                                                      aux_loss=False))
    return build


MODELS = {
    "smp_unet_efficientnet_b0": unet("efficientnet-b0"),
    "smp_unet_timm_efficientnet_b0": unet("timm-efficientnet-b0"),
    "smp_unet_tu_mobilenetv3_large_100": unet("tu-mobilenetv3_large_100"),
    "smp_unet_tu_regnety_002": unet("tu-regnety_002"),
    "smp_unet_tu_convnext_atto": unet("tu-convnext_atto"),
    "smp_unet_tu_hrnet_w18_small": unet("tu-hrnet_w18_small"),
    "smp_unet_mobileone_s0": unet("mobileone_s0"),
    "smp_unet_tu_res2net50_26w_4s": unet("tu-res2net50_26w_4s"),
    "smp_unet_tu_cspresnet50": unet("tu-cspresnet50"),
    "smp_unet_tu_resnest14d": unet("tu-resnest14d"),
    "smp_unet_tu_ghostnet_100": unet("tu-ghostnet_100"),
    "smp_unet_tu_dla34": unet("tu-dla34"),
    "smp_unet_resnet34_scse": unet("resnet34", decoder_attention_type="scse"),
    "smp_upernet_resnet18": smp_model("UPerNet", "resnet18"),
    "smp_deeplabv3_resnet18": smp_model("DeepLabV3", "resnet18"),
    "tv_fcn_resnet50": torchvision_model("fcn_resnet50"),
    "tv_deeplabv3_resnet50": torchvision_model("deeplabv3_resnet50"),
}


def main(out, names):
    for name in names or MODELS:
        try:
            model = MODELS[name]()
        except Exception as err:  # an encoder this smp / timm does not have
            print(f"{name}: not built ({type(err).__name__}: {str(err)[:200]})", flush=True)
            continue
        zoo.models = lambda entry=(name, name, model): iter([entry])
        try:
            zoo.main(out)  # the .pt2 is written before the .onnx: a failed ONNX export leaves the .pt2
        except Exception as err:
            print(f"{name}: export failed ({type(err).__name__}: {str(err)[:300]})", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/zoo_more"), sys.argv[2:])
