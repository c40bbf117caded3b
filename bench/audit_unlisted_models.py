"""The twin audit's function check on ``transformers`` models the documentation does not list,
built tiny from their configs (no download), in float32 and float64: a report, not a timing.

    python bench/audit_unlisted_models.py            (needs the `transformers` extra)

For each model and dtype: whether the audit accepts the model (the gauge twin's output distance
from its base before training, then torch SGD's verdict after three steps) or refuses it (the
reason, shortened). A model that is not a symmetry must be refused in both dtypes: OLMo with
``clip_qkv`` clamps every coordinate of q and k, DeBERTa-v2 with ``share_att_key=False`` reads
the query and key projections outside the logits. A model that computes parts in float32 (the
rotary embeddings of Llama-like models in ``transformers`` 5) must be accepted in float64.
RoFormer, Llama4 and gpt-oss name no rotate function: their pairing is probed on the model;
ModernBERT and Persimmon fuse q/k/v in a class the audit does not know: their row order is
probed the same way, and CodeGen's, which neither candidate order fits, is refused with the
distances. Qwen3, OLMo2 and Gemma3 carry qk-norm gains: their twins are signed permutations.
"""

from __future__ import annotations

import re
import warnings

import torch

from gaugekit.audit import audit_twins

with warnings.catch_warnings():  # tqdm's note that ipywidgets is absent
    warnings.simplefilter("ignore")
    import transformers

SMALL = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
         "intermediate_size": 64, "vocab_size": 100, "initializer_range": 0.2}
#: name → (model class, config class, config overrides)
MODELS: dict[str, tuple[str, str, dict]] = {
    "GPT-2": ("GPT2LMHeadModel", "GPT2Config", {}),
    "GPT-J": ("GPTJForCausalLM", "GPTJConfig", {"rotary_dim": 4}),
    "OPT": ("OPTForCausalLM", "OPTConfig", {"ffn_dim": 64, "word_embed_proj_dim": 32}),
    "Mistral": ("MistralForCausalLM", "MistralConfig", {"num_key_value_heads": 2}),
    "Qwen2": ("Qwen2ForCausalLM", "Qwen2Config", {"num_key_value_heads": 2}),
    "Gemma": ("GemmaForCausalLM", "GemmaConfig", {"num_key_value_heads": 2, "head_dim": 8}),
    "StableLM": ("StableLmForCausalLM", "StableLmConfig", {"num_key_value_heads": 2}),
    "Starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", {"num_key_value_heads": 2}),
    "OLMo": ("OlmoForCausalLM", "OlmoConfig", {}),
    "OLMo clip_qkv=0.02": ("OlmoForCausalLM", "OlmoConfig", {"clip_qkv": 0.02}),
    "Cohere": ("CohereForCausalLM", "CohereConfig", {"num_key_value_heads": 2}),
    "DeBERTa-v2": ("DebertaV2ForMaskedLM", "DebertaV2Config", {}),
    "DeBERTa-v2 share_att_key=False": (
        "DebertaV2ForMaskedLM", "DebertaV2Config",
        {"relative_attention": True, "share_att_key": False, "pos_att_type": ["p2c", "c2p"]}),
    "ELECTRA": ("ElectraForMaskedLM", "ElectraConfig", {"embedding_size": 32}),
    "GPT-Neo": ("GPTNeoForCausalLM", "GPTNeoConfig",
                {"attention_types": [[["global", "local"], 1]], "max_position_embeddings": 64}),
    "RoFormer": ("RoFormerForMaskedLM", "RoFormerConfig", {"embedding_size": 32}),
    "Llama4": ("Llama4ForCausalLM", "Llama4TextConfig",
               {"num_key_value_heads": 2, "head_dim": 8, "intermediate_size_mlp": 64,
                "num_local_experts": 2}),
    "gpt-oss": ("GptOssForCausalLM", "GptOssConfig",
                {"num_key_value_heads": 2, "head_dim": 8, "num_local_experts": 2,
                 "num_experts_per_tok": 1}),
    "CodeGen": ("CodeGenForCausalLM", "CodeGenConfig", {"rotary_dim": 4, "n_ctx": 64}),
    "Persimmon": ("PersimmonForCausalLM", "PersimmonConfig", {"qk_layernorm": False}),
    "Persimmon qk_layernorm": ("PersimmonForCausalLM", "PersimmonConfig", {}),
    "ModernBERT": ("ModernBertForMaskedLM", "ModernBertConfig",
                   {"global_attn_every_n_layers": 1, "local_attention": 16, "pad_token_id": 0,
                    "eos_token_id": 1, "bos_token_id": 2, "cls_token_id": 2,
                    "sep_token_id": 1}),
    "DeepSeek-V3": ("DeepseekV3ForCausalLM", "DeepseekV3Config",
                    {"q_lora_rank": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 4,
                     "qk_nope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 2,
                     "num_experts_per_tok": 1, "moe_intermediate_size": 16,
                     "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1}),
    "Qwen3": ("Qwen3ForCausalLM", "Qwen3Config", {"num_key_value_heads": 2, "head_dim": 8}),
    "OLMo2": ("Olmo2ForCausalLM", "Olmo2Config", {"num_key_value_heads": 2}),
    "Gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", {"num_key_value_heads": 2,
                                                         "head_dim": 8}),
}


def build(name: str, dtype: torch.dtype) -> torch.nn.Module:
    model_class, config_class, overrides = MODELS[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**{**SMALL, **overrides})
    return getattr(transformers, model_class)(config).to(dtype).eval()


def lm_loss(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def audit(name: str, dtype: torch.dtype, ids: torch.Tensor) -> str:
    try:
        model = build(name, dtype)
    except Exception as error:  # noqa: BLE001 - a report of what this transformers builds
        return f"not built here ({type(error).__name__})"
    try:
        r = audit_twins(model, lm_loss, probe=ids, batch=ids, steps=3,
                        optimizer=lambda p: torch.optim.SGD(p, lr=0.1))
    except ValueError as error:
        reason = str(error)
        found = re.search(r"before any training \((.*?)\)(?: at site (.*?))?, so", reason)
        if found is None:
            return f"refused: {reason}"
        where = f" at {found.group(2).split(' ')[0]}" if found.group(2) else ""
        return f"refused: {found.group(1)}{where}"
    note = f" (judged at {r.computes_in})" if r.computes_in else ""
    return (f"accepted: twin at init {r.trace('gauge').init_output_drift:.1e}; SGD "
            f"{r.verdict.outcome}{note}")


def main() -> None:
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(1))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}\n")
    print("| model | float32 | float64 |\n|---|---|---|")
    for name in MODELS:
        cells = [audit(name, dtype, ids).replace("|", "\\|")  # a site's label holds "|"
                 for dtype in (torch.float32, torch.float64)]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
