"""Write a GGUF model as an ordinary Hugging Face folder vLLM serves:
``python gguf_to_hf.py FILE.gguf DEST [CHAT_TEMPLATE_FILE]`` (the template when the GGUF carries none).

Runs in the vLLM environment (``transformers``, ``gguf``, ``torch``), not metasearch's. The weights are
dequantized to float32 (a 135M-parameter model is about 0.5 GB), the tokenizer and the chat template come
from the same file. The last line of output is JSON: the architecture, the context length and whether a
chat template was found.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def convert(gguf: Path, dest: Path, fallback_template: Path | None = None) -> dict[str, object]:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not getattr(tokenizer, "chat_template", None):
        template = _gguf_field(gguf, "tokenizer.chat_template")
        if template:
            tokenizer.chat_template = template
        elif fallback_template is not None:
            tokenizer.chat_template = fallback_template.read_text()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    dest.mkdir(parents=True, exist_ok=True)
    # Dequantized on load, the model still calls itself GGUF-quantized, which save_pretrained refuses: the
    # weights and a config without that claim are written directly.
    config = model.config
    config.architectures = [type(model).__name__]  # what vLLM picks its implementation by
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = {name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied: loaders take it from the embedding, which must be there
    save_file(state, str(dest / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(str(dest))
    if model.generation_config is not None:
        model.generation_config.save_pretrained(str(dest))
    tokenizer.save_pretrained(str(dest))
    text = getattr(config, "text_config", None) or config
    return {
        "architecture": (config.architectures or ["?"])[0],
        "context_length": getattr(text, "max_position_embeddings", None),
        "chat_template": bool(getattr(tokenizer, "chat_template", None)),
    }


def _gguf_field(gguf: Path, key: str) -> str | None:
    from gguf import GGUFReader

    field = GGUFReader(str(gguf)).fields.get(key)
    if field is None:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")


if __name__ == "__main__":
    fallback = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    print(json.dumps(convert(Path(sys.argv[1]), Path(sys.argv[2]), fallback)))
