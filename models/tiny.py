"""Tiny, randomly initialised Hugging Face checkpoints for tests.

Each builder writes a complete local checkpoint folder (``config.json``, ``model.safetensors``,
``tokenizer.json`` plus the tokenizer's config files) in a second or two, without any
download. Weights come from ``torch.manual_seed(seed)``, so the same seed gives the same
checkpoint. The models are untrained: their outputs are noise, but they have exactly the
shapes, inputs and outputs of the real models, which is what export and runtime tests need.

Tokenizers are built with the ``tokenizers`` library over :data:`TINY_TEXT` (a few sentences
in the style of the test data), so every word in it is a single token or a few; other text
still tokenizes (down to characters or bytes), it just takes more tokens.

Builders (all ``(out_dir, seed=0) -> Path``):

==========================  ==============================  =================================
builder                     model class                     tokenizer
==========================  ==============================  =================================
:func:`tiny_t5`             T5ForConditionalGeneration      Unigram + Metaspace (T5-like)
:func:`tiny_albert_qa`      AlbertForQuestionAnswering      WordPiece, lower-cased (BERT-like)
:func:`tiny_roberta_nli`    RobertaForSequenceClassification  byte-level BPE (RoBERTa-like)
:func:`tiny_bert_embed`     BertModel (+ mean pooling)      WordPiece, lower-cased
:func:`tiny_roberta_mlm`    RobertaForMaskedLM              byte-level BPE
:func:`tiny_llama_causal`   Qwen2ForCausalLM / LlamaForCausalLM  byte-level BPE (Qwen2 / GPT-2)
==========================  ==============================  =================================

The NLI model's ``id2label`` is ``{0: CONTRADICTION, 1: NEUTRAL, 2: ENTAILMENT}`` on purpose
(not the MNLI order), so runtime code has to read the labels from the bundle.

Imports torch and transformers lazily; nothing here touches the network.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

TINY_TEXT = """\
Marie Curie was a Polish and naturalised-French physicist and chemist.
She won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911.
She was born in Warsaw on 7 November 1867 and died in 1934.
The Eiffel Tower is in Paris, the capital of France.
Albert Einstein developed the theory of relativity.
Kang Ji-hwan is a South Korean actor who was born on March 20, 1977.
Who won the Nobel Prize in Physics? Where was she born? What is the capital of France?
answer: Paris  context: The Eiffel Tower is in Paris. </s>
question: Where is the Eiffel Tower?
I love dogs, they are my favourite animals. Do you have a dog?
Fact: The tower was built in 1889 for the World's Fair.
Answer the question about Marie Curie based on the given context.
Title: Marie Curie
Text: Marie Salomea Sklodowska Curie was a physicist and chemist who conducted research on radioactivity.
Input: Marie Curie won two Nobel Prizes. True or False?
Output: True
False. Yes, no, not, cannot, unknown, information. I'm sorry, I cannot provide more information.
Please breakdown the following sentence into independent facts: He is an actor.
- He is an actor.
- He was born in Seoul.
"""

_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_CHARS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    ".,;:!?'\"()[]{}<>-_/\\@#$%^&*+=~`|"
)


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _words(text: str = TINY_TEXT) -> list[str]:
    """Distinct words and punctuation marks of ``text``, in order of first appearance."""
    seen: dict[str, None] = {}
    for w in _WORDS.findall(text):
        seen.setdefault(w, None)
    return list(seen)


def _save(model, tokenizer, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


# --- tokenizers -------------------------------------------------------------------------


def t5_tokenizer():
    """A T5-like tokenizer: Unigram pieces over ``▁word`` and single characters, ``</s>`` appended.

    Special ids: ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2 (as in T5). Emits no token_type_ids.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces: dict[str, float] = {}
    for w in _words():
        if w.isalnum() or "_" in w:
            pieces.setdefault("▁" + w, -3.0)
            pieces.setdefault("▁" + w.lower(), -3.5)
        pieces.setdefault(w, -4.0)
    pieces.setdefault("▁", -6.0)
    for c in _CHARS:
        pieces.setdefault(c, -8.0)
        pieces.setdefault("▁" + c, -7.0)
    vocab = specials + [(p, s) for p, s in pieces.items() if p not in dict(specials)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" {2,}", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=512,
        model_input_names=["input_ids", "attention_mask"],
        padding_side="right",
    )


def wordpiece_tokenizer():
    """A BERT-like lower-casing WordPiece tokenizer; [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab: dict[str, int] = {}
    for t in specials:
        vocab[t] = len(vocab)
    for c in _CHARS.lower():
        vocab.setdefault(c, len(vocab))
        vocab.setdefault("##" + c, len(vocab))
    for w in _words():
        vocab.setdefault(w.lower(), len(vocab))
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.add_special_tokens(specials)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def _train_byte_bpe(specials: list[str], vocab_size: int, pre_tokenizer):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TINY_TEXT.splitlines(), trainer=trainer)
    return tok


def roberta_tokenizer():
    """A RoBERTa-like byte-level BPE tokenizer: <s> 0, <pad> 1, </s> 2, <unk> 3, <mask> 4."""
    from tokenizers import AddedToken, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = _train_byte_bpe(specials, 600, pre_tokenizers.ByteLevel(add_prefix_space=False))
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", 2), cls=("<s>", 0), trim_offsets=True, add_prefix_space=False)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token=AddedToken("<mask>", lstrip=True, special=True),
        model_max_length=512,
        model_input_names=["input_ids", "attention_mask"],
    )


# A ChatML template, as Qwen2 instruct models ship (written here for the tiny model).
_CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# The Qwen2 pre-tokenizer split (a public constant of the Qwen2 tokenizer).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def causal_tokenizer(style: str = "qwen2"):
    """A byte-level BPE tokenizer for the tiny causal LM.

    ``<|endoftext|>`` 0 (padding), ``<|im_start|>`` 1, ``<|im_end|>`` 2 (end of turn, the eos),
    ``<s>`` 3. ``style="qwen2"``: Qwen2's regex split then byte-level, NFC, nothing added
    (Qwen2's layout); ``style="llama"``: GPT-2's byte-level split and ``<s>`` at the start of
    every encoding.
    """
    from tokenizers import Regex, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>"]
    if style == "qwen2":
        pre = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok = _train_byte_bpe(specials, 512, pre)
    if style == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        kw = {}
    else:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 3)])
        kw = {"bos_token": "<s>"}
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=512,
        model_input_names=["input_ids", "attention_mask"],
        chat_template=_CHATML,
        **kw,
    )


# --- checkpoints ------------------------------------------------------------------------


def tiny_t5(out_dir: str | Path, seed: int = 0) -> Path:
    """T5ForConditionalGeneration: d_model 32, 2+2 layers, 4 heads; pad 0, eos 1, decoder start 0."""
    _offline()
    import torch
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration

    tok = t5_tokenizer()
    cfg = T5Config(
        vocab_size=len(tok),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(decoder_start_token_id=0, eos_token_id=1, pad_token_id=0, max_length=128)
    return _save(model, tok, Path(out_dir))


def tiny_albert_qa(out_dir: str | Path, seed: int = 0) -> Path:
    """AlbertForQuestionAnswering: hidden 32 (embedding 16), 2 layers, 4 heads; start/end logits."""
    _offline()
    import torch
    from transformers import AlbertConfig, AlbertForQuestionAnswering

    tok = wordpiece_tokenizer()
    cfg = AlbertConfig(
        vocab_size=len(tok),
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    torch.manual_seed(seed)
    return _save(AlbertForQuestionAnswering(cfg).eval(), tok, Path(out_dir))


NLI_ID2LABEL = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def _roberta_config(tok, **kw):
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=514,  # 512 tokens: RoBERTa positions start after the pad id
        type_vocab_size=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **kw,
    )


def tiny_roberta_nli(out_dir: str | Path, seed: int = 0) -> Path:
    """RobertaForSequenceClassification with 3 labels in the order of :data:`NLI_ID2LABEL`."""
    _offline()
    import torch
    from transformers import RobertaForSequenceClassification

    tok = roberta_tokenizer()
    cfg = _roberta_config(
        tok,
        num_labels=3,
        id2label=dict(NLI_ID2LABEL),
        label2id={v: k for k, v in NLI_ID2LABEL.items()},
    )
    torch.manual_seed(seed)
    return _save(RobertaForSequenceClassification(cfg).eval(), tok, Path(out_dir))


def tiny_roberta_mlm(out_dir: str | Path, seed: int = 0) -> Path:
    """RobertaForMaskedLM (the shape of facebook/npm-single, much smaller); mask token ``<mask>``."""
    _offline()
    import torch
    from transformers import RobertaForMaskedLM

    tok = roberta_tokenizer()
    torch.manual_seed(seed)
    return _save(RobertaForMaskedLM(_roberta_config(tok)).eval(), tok, Path(out_dir))


def tiny_bert_embed(out_dir: str | Path, seed: int = 0) -> Path:
    """BertModel sentence encoder laid out like a sentence-transformers model (mean pooling, L2 norm)."""
    _offline()
    import torch
    from transformers import BertConfig, BertModel

    tok = wordpiece_tokenizer()
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    out = _save(BertModel(cfg, add_pooling_layer=False).eval(), tok, Path(out_dir))
    # The two sentence-transformers files that say how token vectors become one vector.
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    (out / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2), encoding="utf-8")
    (out / "2_Normalize").mkdir(exist_ok=True)
    return out


def tiny_mpnet_embed(out_dir: str | Path, seed: int = 0) -> Path:
    """MPNetModel (the architecture of all-mpnet-base-v2, much smaller): no token types, pad id 1."""
    _offline()
    import torch
    from transformers import MPNetConfig, MPNetModel

    tok = roberta_tokenizer()
    cfg = MPNetConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=514, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    torch.manual_seed(seed)
    return _save(MPNetModel(cfg, add_pooling_layer=False).eval(), tok, Path(out_dir))


def tiny_llama_causal(out_dir: str | Path, seed: int = 0, arch: str = "qwen2") -> Path:
    """A tiny causal LM for the GGUF path: ``arch`` "qwen2" (default) or "llama".

    Both: hidden 64, 2 layers, 4 query heads and 2 key/value heads (grouped-query attention),
    FFN 128. The Qwen2 model has q/k/v biases, an untied output head and Qwen2's tokenizer
    layout (no BOS); the Llama model ties the output head to the embeddings and uses a GPT-2
    style tokenizer that starts every input with ``<s>``.
    """
    _offline()
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if arch not in ("qwen2", "llama"):
        raise ValueError(f"arch must be 'qwen2' or 'llama', not {arch!r}")
    tok = causal_tokenizer(style=arch)
    common = dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    torch.manual_seed(seed)
    if arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common, tie_word_embeddings=False))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common, bos_token_id=tok.convert_tokens_to_ids("<s>"), tie_word_embeddings=True))
    # Random init gives all-zero-ish biases; make the Qwen2 q/k/v biases non-zero so the
    # conversion of bias tensors is actually exercised by parity tests.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.02)
    model.generation_config = GenerationConfig(
        eos_token_id=common["eos_token_id"], pad_token_id=common["pad_token_id"], max_length=512
    )
    return _save(model.eval(), tok, Path(out_dir))


BUILDERS = {
    "qg": tiny_t5,
    "qa": tiny_albert_qa,
    "nli": tiny_roberta_nli,
    "embed": tiny_bert_embed,
    "mlm": tiny_roberta_mlm,
    "llm": tiny_llama_causal,
}


def build_all(root: str | Path, roles=None, seed: int = 0) -> dict[str, Path]:
    """Build one tiny checkpoint per role under ``root/<role>``; return ``{role: path}``."""
    root = Path(root)
    return {role: BUILDERS[role](root / role, seed=seed) for role in (roles or BUILDERS)}
