"""Tiny randomly initialised Chronos-Bolt, Chronos-2 and TimesFM 2.5 models built from config
(no download), saved with ``save_pretrained`` so they load through the same path as real weights."""
from __future__ import annotations

import dataclasses
from pathlib import Path

QUANTILES_21 = [0.01, 0.05] + [round(0.05 * i, 2) for i in range(2, 19)] + [0.95, 0.99]


def build_bolt(path: Path) -> Path:
    import torch
    from chronos.chronos_bolt import ChronosBoltModelForForecasting
    from transformers import T5Config

    torch.manual_seed(0)
    model = ChronosBoltModelForForecasting(T5Config(
        d_model=64, d_kv=16, d_ff=256, num_layers=2, num_decoder_layers=2, num_heads=4,
        feed_forward_proj="relu", initializer_factor=0.05, is_encoder_decoder=True,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, vocab_size=2,
        architectures=["ChronosBoltModelForForecasting"], chronos_pipeline_class="ChronosBoltPipeline",
        chronos_config=dict(context_length=2048, input_patch_size=16, input_patch_stride=16, prediction_length=64,
                            quantiles=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], use_reg_token=True)))
    model.save_pretrained(path)
    return path


def build_chronos2(path: Path) -> Path:
    import torch
    from chronos import Chronos2Model
    from chronos.chronos2.config import Chronos2CoreConfig

    torch.manual_seed(0)
    model = Chronos2Model(Chronos2CoreConfig(
        d_model=64, d_kv=16, d_ff=256, num_layers=2, num_heads=4,
        architectures=["Chronos2Model"], chronos_pipeline_class="Chronos2Pipeline",
        chronos_config=dict(context_length=8192, input_patch_size=16, input_patch_stride=16, output_patch_size=16,
                            max_output_patches=64, quantiles=QUANTILES_21, use_reg_token=True, use_arcsinh=True,
                            time_encoding_scale=8192)))
    model.save_pretrained(path)
    return path


def tiny_timesfm_class():
    import timesfm
    from timesfm.configs import ResidualBlockConfig, StackedTransformersConfig
    from timesfm.timesfm_2p5 import timesfm_2p5_torch
    from timesfm.timesfm_2p5.timesfm_2p5_base import TimesFM_2p5_200M_Definition

    d = TimesFM_2p5_200M_Definition()
    q = len(d.quantiles) + 1
    md = 32
    tiny = dataclasses.replace(
        d,
        tokenizer=ResidualBlockConfig(2 * d.input_patch_len, md, md, True, "swish"),
        stacked_transformers=StackedTransformersConfig(
            2, dataclasses.replace(d.stacked_transformers.transformer, model_dims=md, hidden_dims=md, num_heads=4)),
        output_projection_point=ResidualBlockConfig(md, md, d.output_patch_len * q, False, "swish"),
        output_projection_quantiles=ResidualBlockConfig(md, md, d.output_quantile_len * q, False, "swish"),
    )

    class TinyModule(timesfm_2p5_torch.TimesFM_2p5_200M_torch_module):
        config = tiny

    class TinyTimesFM(timesfm.TimesFM_2p5_200M_torch):
        def __init__(self, torch_compile=False, config=None, **kw):
            super().__init__(torch_compile=torch_compile, config=config, **kw)
            self.model = TinyModule()

    return TinyTimesFM


def build_timesfm(path: Path) -> Path:
    import torch

    torch.manual_seed(0)
    tiny_timesfm_class()(torch_compile=False).save_pretrained(path)
    return path


def plant_in_hf_cache(src: Path, hub_root: Path, repo_id: str, revision: str = "0" * 40) -> None:
    """Copy a saved model into an HF cache layout (``hub_root/models--org--name/snapshots/<rev>``)."""
    import shutil

    repo = hub_root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / revision
    snap.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, snap)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
