"""Tiny random vision-language models, built offline from configs and saved with ``save_pretrained``
(safetensors), for tests, benchmarks and smoke runs: nothing is downloaded, and the folders go through
exactly the loading code a real checkpoint does (AutoModel / AutoProcessor, backend.py).

Their embeddings carry no semantics (random weights): they exercise the machinery, never the meaning.
Tokenizers are built from an in-memory vocabulary: every lowercase letter, digit and a little
punctuation as single-character tokens, plus BPE merges that join the words of ``WORDS`` (CLIP). The
SigLIP folder uses either the ``tokenizers``-backed Siglip2 tokenizer with the same characters, or
(``sentencepiece=True``) SigLIP's own SiglipTokenizer on a unigram model trained in memory on ``WORDS``,
the tokenizer real SigLIP checkpoints ship (needs sentencepiece and protobuf, in the ``semantic``
extra). Image processors are the Pil ones (no torchvision).
"""

from __future__ import annotations

import string
from pathlib import Path

import torch

CHARS = string.ascii_lowercase + string.digits + ".,'-!?"
WORDS = ("a photo of the robot car point on clear open floor path driving towards green goal inside red "
         "warning circle touching hazard wall obstacle crash collision safe unsafe danger near far").split()


def _clip_vocab() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(vocab, merges) of a CLIP BPE: characters, characters ending a word (``c</w>``), word merges."""
    tokens = list(CHARS) + [c + "</w>" for c in CHARS]
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        symbols = list(word[:-1]) + [word[-1] + "</w>"]
        while len(symbols) > 1:
            pair = (symbols[0], symbols[1])
            if pair not in merges:
                merges.append(pair)
                tokens.append(symbols[0] + symbols[1])
            symbols = [symbols[0] + symbols[1]] + symbols[2:]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    return {t: i for i, t in enumerate(dict.fromkeys(tokens))}, merges


def save_tiny_clip(out_dir: str | Path, *, seed: int = 0, image_size: int = 32, patch_size: int = 8,
                   hidden: int = 32, layers: int = 2, projection_dim: int = 16) -> Path:
    """A random CLIPModel + CLIPProcessor folder (model.safetensors, tokenizer, processor configs)."""
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vocab, merges = _clip_vocab()
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges)
    ids = dict(bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"],
               pad_token_id=vocab["<|endoftext|>"])
    tower = dict(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=4, num_hidden_layers=layers,
                 projection_dim=projection_dim)
    config = CLIPConfig(text_config=dict(tower, vocab_size=len(vocab), max_position_embeddings=32, **ids),
                        vision_config=dict(tower, image_size=image_size, patch_size=patch_size),
                        projection_dim=projection_dim)
    images = CLIPImageProcessorPil(size={"shortest_edge": image_size},
                                   crop_size={"height": image_size, "width": image_size})
    return _save(CLIPModel, config, CLIPProcessor(image_processor=images, tokenizer=tokenizer), out_dir, seed)


def _sentencepiece_model(path: Path) -> Path:
    """A unigram sentencepiece model trained on ``WORDS`` (pad 0, eos 1, unk 2, no bos), as SigLIP's."""
    import io

    import sentencepiece

    sentences = [" ".join(WORDS[i:i + 5]) for i in range(len(WORDS))]
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=60, model_type="unigram", pad_id=0,
        eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    path.write_bytes(model.getvalue())
    return path


def save_tiny_siglip(out_dir: str | Path, *, seed: int = 0, image_size: int = 32, patch_size: int = 8,
                     hidden: int = 32, layers: int = 2, sentencepiece: bool = False) -> Path:
    """A random SiglipModel + SiglipProcessor folder (Siglip2 tokenizer from an in-memory vocabulary, or
    SiglipTokenizer on an in-memory sentencepiece model)."""
    from transformers import SiglipConfig, SiglipModel, SiglipProcessor, SiglipTokenizer
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
    from transformers.models.siglip2.tokenization_siglip2 import Siglip2Tokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if sentencepiece:
        tokenizer = SiglipTokenizer(vocab_file=str(_sentencepiece_model(out / "spiece.model")))
        ids = dict(bos_token_id=1, eos_token_id=1, pad_token_id=0)
    else:
        vocab = {t: i for i, t in enumerate(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "\u2581", *CHARS])}
        tokenizer = Siglip2Tokenizer(vocab=vocab, merges=[])
        ids = dict(bos_token_id=vocab["<bos>"], eos_token_id=vocab["<eos>"], pad_token_id=vocab["<pad>"])
    tower = dict(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=4, num_hidden_layers=layers)
    config = SiglipConfig(text_config=dict(tower, vocab_size=len(tokenizer), max_position_embeddings=32,
                                           projection_size=hidden, **ids),
                          vision_config=dict(tower, image_size=image_size, patch_size=patch_size))
    images = SiglipImageProcessorPil(size={"height": image_size, "width": image_size})
    return _save(SiglipModel, config, SiglipProcessor(image_processor=images, tokenizer=tokenizer), out_dir, seed)


def _save(model_cls, config, processor, out_dir: str | Path, seed: int) -> Path:
    out = Path(out_dir)
    with torch.random.fork_rng(devices=[]):  # the caller's RNG stream is left as it was
        torch.manual_seed(seed)
        model = model_cls(config)
    model.save_pretrained(out)  # safetensors
    processor.save_pretrained(out)
    return out
