"""The twin audit on Hugging Face ``transformers`` models built from configs (no download): a
report of verdicts, not a timing.

    python bench/audit_transformers.py          (needs the `transformers` extra)

For a tiny BERT, GPT-2 (fused ``c_attn``), Llama (grouped-query attention, rotary position
embeddings) and the fused layouts of Phi-3 (``[q; k; v]`` rows, grouped-query, rotary), Falcon
(rows grouped by key-value group, rotary) and MPT (``[q; k; v]`` rows, ALiBi) in float64: each
optimizer's gauge twin and 1e-7 noise twin after a few steps, the verdict, and the gauge twin's
output distance from its base before training (the function identity check). Then, for the
rotary models, the same check for a twin drawn from the residual gauge (a rotation of each
frequency pair) against a Haar rotation of the whole head, which does not commute with the
rotary map (the negative control).
"""

from __future__ import annotations

import dataclasses
import warnings

import torch

import gaugekit
from gaugekit.audit import audit_twins, find_qk_sites, gauge_twin
from gaugekit.audit.heads import output_drift

with warnings.catch_warnings():  # tqdm's note that ipywidgets is absent
    warnings.simplefilter("ignore")
    import transformers

SMALL = {"num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 100,
         "initializer_range": 0.2}
MODELS = {
    "BERT": lambda: transformers.BertForMaskedLM(transformers.BertConfig(
        hidden_size=32, num_attention_heads=4, **SMALL)),
    "GPT-2": lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=32, n_head=4, n_layer=2, vocab_size=100, initializer_range=0.2)),
    "Llama (GQA, RoPE)": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, **SMALL)),
    "Phi-3 (fused, GQA)": lambda: transformers.Phi3ForCausalLM(transformers.Phi3Config(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, **SMALL)),
    "Falcon (grouped)": lambda: transformers.FalconForCausalLM(transformers.FalconConfig(
        hidden_size=32, num_attention_heads=4, num_kv_heads=2, num_hidden_layers=2,
        vocab_size=100, new_decoder_architecture=True, initializer_range=0.2)),
    "MPT (fused, ALiBi)": lambda: transformers.MptForCausalLM(transformers.MptConfig(
        d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, vocab_size=100,
        initializer_range=0.2)),
}
OPTIMIZERS = {
    "Adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
    "SGD": lambda p: torch.optim.SGD(p, lr=0.1),
    "SharedScaleAdam": lambda p: gaugekit.optim.SharedScaleAdam(p, lr=1e-3),
    "MuonAdam": "muon",
}


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return MODELS[name]().double().eval()


def lm_loss(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def main() -> None:
    ids = torch.randint(0, 100, (4, 12), generator=torch.Generator().manual_seed(1))
    print(f"{'model':18} {'optimizer':16} {'gauge':>9} {'noise':>9} {'gauge/noise':>11}"
          f"  {'twin at init':>12}  verdict")
    for name in MODELS:
        for label, optimizer in OPTIMIZERS.items():
            r = audit_twins(build(name), lm_loss, probe=ids, batch=ids, optimizer=optimizer,
                            steps=5)
            g, n = r.trace("gauge").max_drift, r.trace("noise").max_drift
            print(f"{name:18} {label:16} {g:9.2e} {n:9.2e} {g / n:11.3g}"
                  f"  {r.trace('gauge').init_output_drift:12.1e}  {r.verdict.outcome}")
    print("\nOutput distance from the base before training (the function-identity check):")
    for name in ("Llama (GQA, RoPE)", "Phi-3 (fused, GQA)", "Falcon (grouped)"):
        model = build(name)
        sites = find_qk_sites(model)
        residual, _ = gauge_twin(model, sites, generator=torch.Generator().manual_seed(5))
        whole = [dataclasses.replace(s, rotary=None) for s in sites]
        haar, _ = gauge_twin(model, whole, generator=torch.Generator().manual_seed(5),
                             check_structure=False)
        print(f"  {name:18} residual-gauge twin {output_drift(model, residual, ids):.1e}; "
              f"whole-head Haar twin (negative control) {output_drift(model, haar, ids):.3f}")


if __name__ == "__main__":
    main()
