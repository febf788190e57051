"""tessera convert: open Hugging Face block-diffusion checkpoints -> Tessera's model contract."""
