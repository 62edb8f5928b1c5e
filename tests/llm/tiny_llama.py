"""Make a tiny randomly initialised Llama model with a locally trained tokenizer (nothing downloaded).

Run with an interpreter that has ``transformers`` and ``tokenizers`` (the vLLM environment):
``python tiny_llama.py DEST``. The model is nonsense by construction; it exists so a real vLLM server can
load and serve something on a machine without network or GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

TEXT = (
    """
The agent reads the task and writes a solution. A search over agent designs keeps an archive of designs,
evaluates them on benchmark tasks and expands the promising ones. Kernels are made faster, bugs are fixed,
models are trained. def solve(task): return task.answer  # python code appears too
"""
    * 20
)

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def make_tiny_llama(dest: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator([TEXT], trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(dest)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,  # head_dim 64: vLLM's CPU attention supports 32/64/80/96/112/128, not 16
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(dest, safe_serialization=True)
    GenerationConfig(bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id).save_pretrained(dest)
    return dest


if __name__ == "__main__":
    print(make_tiny_llama(Path(sys.argv[1])))
