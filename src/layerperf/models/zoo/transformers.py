"""Transformer encoders/decoders written out op by op: BERT-base and GPT-2 small.

The graphs use the plain ops a PyTorch export produces (MatMul + Add for Linear, Reshape /
Transpose to split heads, Softmax, Erf/Tanh GELU) rather than fused contrib ops, so that ONNX
Runtime's own fusions (Attention, SkipLayerNormalization, BiasGelu, FastGelu, ...) have the
usual patterns to find. Names follow Hugging Face's module names. Weights are N(0, 0.02^2),
Hugging Face's initializer range, with LayerNorm gamma 1 and beta 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from layerperf.models.zoo._graph import GraphBuilder

INIT_STD = 0.02
# Added to the scores of masked-out keys before Softmax; the value BERT-era exports use, and the
# constant ONNX Runtime's attention fusion looks for.
MASK_VALUE = -10000.0


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of a BERT/GPT-2 style stack."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    eps: float

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


BERT_BASE = TransformerConfig(
    layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522, max_positions=512, eps=1e-12
)
GPT2_SMALL = TransformerConfig(
    layers=12, hidden=768, heads=12, intermediate=3072, vocab=50257, max_positions=1024, eps=1e-5
)
BERT_TYPE_VOCAB = 2


# -- building blocks shared by both models -------------------------------------------------------


def _linear(g: GraphBuilder, x: str, name: str, din: int, dout: int) -> str:
    """nn.Linear / GPT-2 Conv1D on a [batch, seq, din] tensor: MatMul with a [din, dout] weight, then Add."""
    h = g.op("MatMul", name, x, g.normal(f"{name}.weight", [din, dout], INIT_STD))
    return g.op("Add", f"{name}.bias_add", h, g.normal(f"{name}.bias", [dout], INIT_STD))


def _layer_norm(g: GraphBuilder, x: str, name: str, cfg: TransformerConfig, out: str | None = None) -> str:
    gamma = g.filled(f"{name}.weight", [cfg.hidden], 1.0)
    beta = g.filled(f"{name}.bias", [cfg.hidden], 0.0)
    (y,) = g.op_multi("LayerNormalization", name, [x, gamma, beta], [out or name], axis=-1, epsilon=cfg.eps)
    return y


def _split_heads(g: GraphBuilder, x: str, name: str, shape: str, perm: list[int]) -> str:
    """[B, S, hidden] -> [B, S, heads, head_dim] -> transposed by ``perm`` (K goes straight to K^T)."""
    h = g.op("Reshape", f"{name}.reshape", x, shape)
    return g.op("Transpose", f"{name}.transpose", h, perm=perm)


def _attend(
    g: GraphBuilder,
    qkv: tuple[str, str, str],
    prefix: str,
    cfg: TransformerConfig,
    batch: int,
    seq: int,
    mask: str,
) -> str:
    """softmax(Q K^T / sqrt(d) + mask) V with the heads merged back to [B, S, hidden]."""
    q, k, v = qkv
    heads_shape = g.ints(batch, seq, cfg.heads, cfg.head_dim)
    q = _split_heads(g, q, f"{prefix}.query", heads_shape, [0, 2, 1, 3])
    k = _split_heads(g, k, f"{prefix}.key", heads_shape, [0, 2, 3, 1])
    v = _split_heads(g, v, f"{prefix}.value", heads_shape, [0, 2, 1, 3])
    scores = g.op("MatMul", f"{prefix}.scores", q, k)
    scores = g.op("Div", f"{prefix}.scale", scores, g.scalar(math.sqrt(cfg.head_dim)))
    scores = g.op("Add", f"{prefix}.mask_add", scores, mask)
    probs = g.op("Softmax", f"{prefix}.softmax", scores, axis=3)
    context = g.op("MatMul", f"{prefix}.context", probs, v)
    context = g.op("Transpose", f"{prefix}.context.transpose", context, perm=[0, 2, 1, 3])
    return g.op("Reshape", f"{prefix}.context.reshape", context, g.ints(batch, seq, cfg.hidden))


def _token_ids(g: GraphBuilder, batch: int, seq: int) -> str:
    return g.input("input_ids", "int64", [batch, seq])


def _position_ids(g: GraphBuilder, name: str, seq: int) -> str:
    return g.buffer(name, np.arange(seq, dtype=np.int64).reshape(1, seq))


# -- BERT-base (post-LayerNorm encoder, Erf GELU) -------------------------------------------------


def gelu_erf(g: GraphBuilder, x: str, prefix: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))), BERT's exact GELU, in an op order ORT's GeluFusion matches."""
    h = g.op("Div", f"{prefix}.div", x, g.scalar(math.sqrt(2.0)))
    h = g.op("Add", f"{prefix}.add", g.op("Erf", f"{prefix}.erf", h), g.scalar(1.0))
    h = g.op("Mul", f"{prefix}.mul", x, h)
    return g.op("Mul", f"{prefix}.half", h, g.scalar(0.5))


def _bert_embeddings(g: GraphBuilder, cfg: TransformerConfig, batch: int, seq: int) -> str:
    """word + position + token-type (all type 0) embeddings, then LayerNorm."""
    ids = _token_ids(g, batch, seq)
    p = "embeddings"
    table = g.normal(f"{p}.word_embeddings.weight", [cfg.vocab, cfg.hidden], INIT_STD)
    words = g.op("Gather", f"{p}.word_embeddings", table, ids)
    table = g.normal(f"{p}.position_embeddings.weight", [cfg.max_positions, cfg.hidden], INIT_STD)
    positions = g.op("Gather", f"{p}.position_embeddings", table, _position_ids(g, f"{p}.position_ids", seq))
    table = g.normal(f"{p}.token_type_embeddings.weight", [BERT_TYPE_VOCAB, cfg.hidden], INIT_STD)
    type_ids = g.buffer(f"{p}.token_type_ids", np.zeros((batch, seq), dtype=np.int64))
    types = g.op("Gather", f"{p}.token_type_embeddings", table, type_ids)
    h = g.op("Add", f"{p}.add_position", words, positions)
    h = g.op("Add", f"{p}.add_token_type", h, types)
    return _layer_norm(g, h, f"{p}.LayerNorm", cfg)


def _bert_extended_mask(g: GraphBuilder, batch: int, seq: int) -> str:
    """attention_mask [B, S] of 1/0 -> additive [B, 1, 1, S] mask: 0 to keep, -10000 to drop."""
    mask = g.input("attention_mask", "int64", [batch, seq])
    p = "extended_attention_mask"
    h = g.op("Unsqueeze", f"{p}.unsqueeze1", mask, g.ints(1))
    h = g.op("Unsqueeze", f"{p}.unsqueeze2", h, g.ints(2))
    h = g.op("Cast", f"{p}.cast", h, to=1)  # to float32
    h = g.op("Sub", f"{p}.invert", g.scalar(1.0), h)
    return g.op("Mul", f"{p}.scale", h, g.scalar(MASK_VALUE))


def _bert_layer(
    g: GraphBuilder,
    x: str,
    prefix: str,
    cfg: TransformerConfig,
    batch: int,
    seq: int,
    mask: str,
    out: str | None = None,
) -> str:
    """Self-attention and feed-forward, each closed by residual Add + LayerNorm (post-LN)."""
    a = f"{prefix}.attention"
    qkv = tuple(_linear(g, x, f"{a}.self.{n}", cfg.hidden, cfg.hidden) for n in ("query", "key", "value"))
    context = _attend(g, (qkv[0], qkv[1], qkv[2]), f"{a}.self", cfg, batch, seq, mask)
    h = _linear(g, context, f"{a}.output.dense", cfg.hidden, cfg.hidden)
    h = g.op("Add", f"{a}.output.residual", h, x)
    attended = _layer_norm(g, h, f"{a}.output.LayerNorm", cfg)
    h = _linear(g, attended, f"{prefix}.intermediate.dense", cfg.hidden, cfg.intermediate)
    h = gelu_erf(g, h, f"{prefix}.intermediate.gelu")
    h = _linear(g, h, f"{prefix}.output.dense", cfg.intermediate, cfg.hidden)
    h = g.op("Add", f"{prefix}.output.residual", h, attended)
    return _layer_norm(g, h, f"{prefix}.output.LayerNorm", cfg, out)


def build_bert_base(g: GraphBuilder, batch: int, seq: int) -> None:
    """BERT-base encoder (no pooler): inputs input_ids and attention_mask, output last_hidden_state."""
    cfg = BERT_BASE
    h = _bert_embeddings(g, cfg, batch, seq)
    mask = _bert_extended_mask(g, batch, seq)
    for i in range(cfg.layers):
        out = "last_hidden_state" if i == cfg.layers - 1 else None
        h = _bert_layer(g, h, f"encoder.layer.{i}", cfg, batch, seq, mask, out)
    g.output("last_hidden_state", "float32", [batch, seq, cfg.hidden])


# -- GPT-2 small (pre-LayerNorm decoder, tanh GELU, causal mask, LM head tied to wte) -------------


def gelu_tanh(g: GraphBuilder, x: str, prefix: str) -> str:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), GPT-2's "gelu_new"."""
    h = g.op("Pow", f"{prefix}.cube", x, g.scalar(3.0))
    h = g.op("Add", f"{prefix}.add_cube", x, g.op("Mul", f"{prefix}.mul_coeff", h, g.scalar(0.044715)))
    h = g.op("Mul", f"{prefix}.mul_sqrt", h, g.scalar(math.sqrt(2.0 / math.pi)))
    h = g.op("Tanh", f"{prefix}.tanh", h)
    h = g.op("Add", f"{prefix}.add_one", h, g.scalar(1.0))
    return g.op("Mul", f"{prefix}.mul", g.op("Mul", f"{prefix}.half", x, g.scalar(0.5)), h)


def _causal_mask(g: GraphBuilder, seq: int) -> str:
    """[1, 1, S, S] additive mask: 0 where a query may see a key (key <= query), large negative after."""
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    mask = np.where(future, np.float32(MASK_VALUE), np.float32(0.0)).astype(np.float32)
    return g.buffer("transformer.causal_mask", mask.reshape(1, 1, seq, seq))


def _gpt2_block(g: GraphBuilder, x: str, prefix: str, cfg: TransformerConfig, batch: int, seq: int, mask: str) -> str:
    """x + attn(ln_1(x)), then + mlp(ln_2(.)): GPT-2's pre-LayerNorm block."""
    a = f"{prefix}.attn"
    h = _linear(g, _layer_norm(g, x, f"{prefix}.ln_1", cfg), f"{a}.c_attn", cfg.hidden, 3 * cfg.hidden)
    split = g.ints(cfg.hidden, cfg.hidden, cfg.hidden)
    q, k, v = g.op_multi("Split", f"{a}.split", [h, split], [f"{a}.q", f"{a}.k", f"{a}.v"], axis=2)
    context = _attend(g, (q, k, v), a, cfg, batch, seq, mask)
    x = g.op("Add", f"{prefix}.attn_residual", x, _linear(g, context, f"{a}.c_proj", cfg.hidden, cfg.hidden))
    m = f"{prefix}.mlp"
    h = _linear(g, _layer_norm(g, x, f"{prefix}.ln_2", cfg), f"{m}.c_fc", cfg.hidden, cfg.intermediate)
    h = _linear(g, gelu_tanh(g, h, f"{m}.gelu"), f"{m}.c_proj", cfg.intermediate, cfg.hidden)
    return g.op("Add", f"{prefix}.mlp_residual", x, h)


def _gpt2_lm_head(g: GraphBuilder, h: str, wte: str, cfg: TransformerConfig, batch: int, seq: int) -> None:
    """logits = h @ wte^T, the LM head tied to the token embedding as in Hugging Face's GPT-2.

    The Transpose reads only an initializer, so ONNX Runtime constant-folds it at load time;
    the file keeps a single copy of wte.
    """
    wte_t = g.op("Transpose", "lm_head.weight_transpose", wte, perm=[1, 0])
    g.op_multi("MatMul", "lm_head", [h, wte_t], ["logits"])
    g.output("logits", "float32", [batch, seq, cfg.vocab])


def build_gpt2_small(g: GraphBuilder, batch: int, seq: int) -> None:
    """GPT-2 small (124M): input_ids -> 12 decoder blocks -> ln_f -> tied LM head -> logits."""
    cfg = GPT2_SMALL
    ids = _token_ids(g, batch, seq)
    wte = g.normal("transformer.wte.weight", [cfg.vocab, cfg.hidden], INIT_STD)
    wpe = g.normal("transformer.wpe.weight", [cfg.max_positions, cfg.hidden], INIT_STD)
    tokens = g.op("Gather", "transformer.wte", wte, ids)
    positions = g.op("Gather", "transformer.wpe", wpe, _position_ids(g, "transformer.position_ids", seq))
    h = g.op("Add", "transformer.add_position", tokens, positions)
    mask = _causal_mask(g, seq)
    for i in range(cfg.layers):
        h = _gpt2_block(g, h, f"transformer.h.{i}", cfg, batch, seq, mask)
    h = _layer_norm(g, h, "transformer.ln_f", cfg)
    _gpt2_lm_head(g, h, wte, cfg, batch, seq)
