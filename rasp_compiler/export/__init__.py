"""Exports of compiled models to other tools (TransformerLens)."""

from rasp_compiler.export.transformer_lens import (
    UnsupportedUnitError,
    load_transformer_lens,
    padding_hooks,
    run_padded,
    save_transformer_lens,
    tl_config,
    tl_state_dict,
    to_hooked_transformer,
    verify,
)

__all__ = ["UnsupportedUnitError", "load_transformer_lens", "padding_hooks", "run_padded",
           "save_transformer_lens", "tl_config", "tl_state_dict", "to_hooked_transformer", "verify"]
