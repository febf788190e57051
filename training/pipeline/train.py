"""Trains the bundled block-diffusion model (docs/model-contract.md, docs/architecture.md §4-§6).

    python3 training/pipeline/train.py --data training/data --out training/out [--preset small|smoke]
                              [--train-minutes 12.5] [--stop-minutes 7] [--resume]

Steps: (1) train the byte-level BPE tokenizer on the training texts (once; kept in
<out>/tokenizer); (2) tokenize train/val (cached in <out>/tokenized.pt); (3) train with the
block-diffusion objective until ``--stop-minutes`` of training time have been spent (the
learning-rate schedule spans ``--train-minutes``, so a run stopped early and resumed with
``--resume`` follows the same schedule); checkpoints go to <out>/ckpt.pt, the loss curve to
<out>/loss.csv.

Objective: every reply block gets its own masking ratio t ~ U(0, 1); each reply token of
the block is masked with probability t (at least one). The loss is the plain mean
cross-entropy over masked chat tokens (no 1/t weighting: it is steadier on a small model and
the decoder only needs well-ranked confident tokens), plus, for decision examples, the mean
cross-entropy of the answer slot over the offered labels only (softmax restricted to them,
exactly the readout the service does).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import sys
import time
from typing import Dict, List

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from dataset import IGNORE, BatchStream, attention_allowed, batches, read_jsonl, tokenize_records  # noqa: E402
from infer import load_checkpoint  # noqa: E402
from model import BlockDiffusionLM, ModelConfig, rotary_cos_sin  # noqa: E402
from tok import Tok, train_tokenizer  # noqa: E402

T_START = time.time()

PRESETS: Dict[str, dict] = {
    # ~13.4M parameters: fits the 60 MB budget in fp32.
    "small": dict(hidden_size=384, intermediate_size=768, num_hidden_layers=8, num_attention_heads=6,
                  num_key_value_heads=2, head_dim=64, vocab=8192, rows=64, row_len=1024, max_len=1024, lr=1.5e-3),
    # CPU smoke test: minutes on two cores.
    "smoke": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, vocab=700, rows=4, row_len=512, max_len=512, lr=3e-3),
    # Model v2 (issue 25): the small shape warm-started from the bundled weights, 4,096 positions.
    # Examples longer than a 1,024-token row go to 4,096-token rows (16 a batch, about the same
    # tokens), taken every ``long_every``-th step, so short rows do not pay for long attention.
    "v2": dict(hidden_size=384, intermediate_size=768, num_hidden_layers=8, num_attention_heads=6,
               num_key_value_heads=2, head_dim=64, vocab=8192, rows=64, row_len=1024, max_len=4096, lr=8e-4,
               max_position_embeddings=4096, long_rows=16, long_len=4096, long_every=6),
    # CPU smoke test of the v2 pipeline: the v2 code paths at toy sizes (seconds a step).
    "smoke-v2": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, vocab=8192, rows=2, row_len=512, max_len=2048, lr=3e-3,
                     max_position_embeddings=4096, long_rows=1, long_len=2048, long_every=3),
}
DATA_FILES = {"train": ["train.jsonl", "train_v2.jsonl", "raw_pool.jsonl"], "val": ["val.jsonl", "val_v2.jsonl"]}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def tokenizer_texts(records: List[dict]) -> List[str]:
    texts = []
    for r in records:
        if r["k"] == "chat":
            texts.append(r["p"] + r["r"])
        else:
            pre, suf = r["v"][0]
            texts.append(pre + suf)
    return texts


def hidden_states(model: BlockDiffusionLM, ids: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The model's forward up to the final norm (the LM head is applied only where needed)."""
    x = model.embed_tokens(ids)
    cos, sin = rotary_cos_sin(pos, model.config.head_dim, model.config.rope_theta, x.dtype)
    for layer in model.layers:
        x, _ = layer(x, cos, sin, allowed, None, model.use_sdpa)
    return model.norm(x)


def batch_loss(model: BlockDiffusionLM, batch: Dict[str, torch.Tensor], device: torch.device, dec_weight: float):
    ids = batch["input_ids"].to(device, non_blocking=True)
    pos = batch["position_ids"].to(device, non_blocking=True)
    allowed = attention_allowed(batch["doc"].to(device), batch["block"].to(device), batch["copy"].to(device))
    h = hidden_states(model, ids, pos, allowed)
    hf = h.reshape(-1, h.shape[-1])
    W = model.embed_tokens.weight
    tgt = batch["target"].to(device).reshape(-1)
    sel = (tgt != IGNORE).nonzero(as_tuple=True)[0]
    zero = hf.sum() * 0.0
    if sel.numel():
        logits = (hf[sel] @ W.t()).float()
        chat_loss = F.cross_entropy(logits, tgt[sel])
    else:
        chat_loss = zero
    n_slots = batch["slot_index"].numel()
    if n_slots:
        hs = hf[batch["slot_index"].to(device)]
        labels = batch["slot_labels"].to(device)
        valid = labels >= 0
        lw = W[labels.clamp(min=0)]  # [N, K, H]
        logits = torch.einsum("nh,nkh->nk", hs.float(), lw.float())
        logits = logits.masked_fill(~valid, -1e9)
        logp = torch.log_softmax(logits, dim=-1)
        target = batch["slot_target"].to(device)
        w = batch["slot_weight"].to(device)
        dec_loss = (-(target * logp.masked_fill(~valid, 0.0)).sum(-1) * w).sum() / w.sum()
        dec_acc = ((logits.argmax(-1) == target.argmax(-1)).float().mean()).item()
    else:
        dec_loss, dec_acc = zero, float("nan")
    return chat_loss + dec_weight * dec_loss, chat_loss.detach(), dec_loss.detach(), dec_acc, int(sel.numel()), n_slots


def lr_at(frac: float, peak: float, warmup: float = 0.03, floor: float = 0.1) -> float:
    if frac < warmup:
        return peak * frac / warmup
    p = min(1.0, (frac - warmup) / (1 - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def load_or_build_data(args, preset, tok_dir: str):
    cache = os.path.join(args.out, "tokenized.pt")
    if os.path.exists(cache) and os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        log(f"loading {cache}")
        try:
            data = torch.load(cache, weights_only=False)
        except TypeError:  # torch 1.x has no weights_only
            data = torch.load(cache)
        return Tok(os.path.join(tok_dir, "tokenizer.json")), data
    def read_split(split: str, limit) -> List[dict]:
        names = args.train_files.split(",") if split == "train" and args.train_files else DATA_FILES[split]
        recs: List[dict] = []
        for name in names:
            found = [p for p in [os.path.join(args.data, name + ".xz"), os.path.join(args.data, name)] if os.path.exists(p)]
            if found:
                recs += read_jsonl(found[0], limit)
            elif name in ("train.jsonl", "val.jsonl") and not args.train_files:
                raise SystemExit(f"{args.data}: no {name}")
        return recs

    t0 = time.time()
    train_recs = read_split("train", args.limit)
    val_recs = read_split("val", args.limit and max(200, args.limit // 10))
    log(f"read {len(train_recs)} train / {len(val_recs)} val records in {time.time() - t0:.0f}s")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        with open(os.path.join(TRAINING, "templates", "chat_template.jinja"), encoding="utf-8") as f:
            chat_template = f.read()
        texts = tokenizer_texts(train_recs)
        if args.tokenizer_sample and len(texts) > args.tokenizer_sample:
            texts = random.Random(0).sample(texts, args.tokenizer_sample)
        t0 = time.time()
        train_tokenizer(texts, preset["vocab"], tok_dir, chat_template, preset["max_position_embeddings"])
        log(f"tokenizer trained on {len(texts)} texts in {time.time() - t0:.0f}s")
    tok = Tok(os.path.join(tok_dir, "tokenizer.json"))
    t0 = time.time()
    train_ex, dropped_train = tokenize_records(train_recs, tok, 64, preset["max_len"])
    val_ex, dropped_val = tokenize_records(val_recs, tok, 64, preset["max_len"])
    log(f"tokenized in {time.time() - t0:.0f}s: {len(train_ex)} train, {len(val_ex)} val examples; dropped {dropped_train} / {dropped_val}")
    data = {"train": train_ex, "val": val_ex, "dropped": {"train": dropped_train, "val": dropped_val}}
    torch.save(data, cache)
    return tok, data


def copy_tokenizer(model_dir: str, tok_dir: str, max_positions: int) -> None:
    """The warm start keeps the model's tokenizer; its config gets the new context length."""
    os.makedirs(tok_dir, exist_ok=True)
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = f.read()
    with open(os.path.join(tok_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tj)
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["model_max_length"] = max_positions
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)


def data_stats(examples) -> dict:
    by_task: Dict[str, dict] = {}
    for ex in examples:
        s = by_task.setdefault(ex.task, {"examples": 0, "tokens": 0, "target_tokens": 0})
        s["examples"] += 1
        s["tokens"] += int(len(ex.ids))
        s["target_tokens"] += int(len(ex.ids) - ex.n_prompt)
    total = {k: sum(v[k] for v in by_task.values()) for k in ["examples", "tokens", "target_tokens"]}
    return {"total": total, "by_task": by_task}


@torch.no_grad()
def validate(model, val_examples, preset, ids, device, dec_weight, max_batches=12):
    model.eval()
    out = {"chat": [], "dec": [], "acc": []}
    stream = batches(val_examples, preset["rows"], preset["row_len"], 64, ids["mask"], ids["pad"], seed=1234, epochs=1)
    for i, batch in enumerate(stream):
        if i >= max_batches:
            break
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            _, c, d, acc, nc, nd = batch_loss(model, batch, device, dec_weight)
        if nc:
            out["chat"].append(c.item())
        if nd:
            out["dec"].append(d.item())
            out["acc"].append(acc)
    model.train()
    return {k: (float(np.mean(v)) if v else float("nan")) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(TRAINING, "data"))
    ap.add_argument("--out", default=os.path.join(TRAINING, "out"))
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--train-minutes", type=float, default=12.5, help="length of the whole LR schedule")
    ap.add_argument("--stop-minutes", type=float, default=None, help="stop this run once this much training time is spent")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--wall-minutes", type=float, default=None, help="stop training once the process has run this long")
    ap.add_argument("--resume", action="store_true", help="continue from <out>/ckpt.pt (or --init-weights)")
    ap.add_argument("--init-weights", default=None, help="weights-only checkpoint to resume from when ckpt.pt is absent")
    ap.add_argument("--limit", type=int, default=None, help="read only this many records (smoke tests)")
    ap.add_argument("--tokenizer-sample", type=int, default=None)
    ap.add_argument("--dec-weight", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt-every-minutes", type=float, default=3.0)
    ap.add_argument("--weights-out", default=None, help="also write bf16 weights + schedule state here (resume elsewhere)")
    ap.add_argument("--init-onnx", default=None, help="warm start: weights and tokenizer of this contract model directory")
    ap.add_argument("--init-ckpt", default=None, help="warm start: weights of this checkpoint (fresh schedule; self-distillation)")
    ap.add_argument("--train-files", default=None, help="comma-separated files under --data instead of the default mixture")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate instead of the preset's")
    args = ap.parse_args()

    preset = dict(PRESETS[args.preset])
    if args.lr is not None:
        preset["lr"] = args.lr
    preset.setdefault("max_position_embeddings", 2048)
    os.makedirs(args.out, exist_ok=True)
    tok_dir = os.path.join(args.out, "tokenizer")
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    if args.init_onnx and not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        copy_tokenizer(args.init_onnx, tok_dir, preset["max_position_embeddings"])
    tok, data = load_or_build_data(args, preset, tok_dir)
    ids = {"mask": tok.token_id("<|mask|>"), "eos": tok.token_id("<|im_end|>"), "pad": tok.token_id("<|pad|>")}
    stats = {"train": data_stats(data["train"]), "val": data_stats(data["val"]), "dropped": data["dropped"]}
    with open(os.path.join(args.out, "data_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    log(f"train tokens {stats['train']['total']['tokens']:,} (targets {stats['train']['total']['target_tokens']:,})")

    warm = None
    if args.init_onnx:
        from onnx_weights import model_from_onnx

        warm = model_from_onnx(args.init_onnx, preset["max_position_embeddings"])
    elif args.init_ckpt:
        warm = load_checkpoint(args.init_ckpt, torch.device("cpu"))
    cfg = warm.config if warm is not None else ModelConfig(
        vocab_size=tok.vocab_size, hidden_size=preset["hidden_size"], intermediate_size=preset["intermediate_size"],
        num_hidden_layers=preset["num_hidden_layers"], num_attention_heads=preset["num_attention_heads"],
        num_key_value_heads=preset["num_key_value_heads"], head_dim=preset["head_dim"],
        max_position_embeddings=preset["max_position_embeddings"], block_size=64,
        mask_token_id=ids["mask"], eos_token_id=ids["eos"], pad_token_id=ids["pad"],
    )
    model = (warm if warm is not None else BlockDiffusionLM(cfg)).to(device).train()
    if warm is not None:
        log(f"warm start from {args.init_onnx or args.init_ckpt} (shape of that model; context {cfg.max_position_embeddings})")
    log(f"model: {model.num_parameters():,} parameters on {device}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=preset["lr"], betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if device.type == "cuda" else {}))
    state = {"step": 0, "elapsed": 0.0, "tokens": 0}
    rewarm_steps = 0
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    if args.resume:
        if os.path.exists(ckpt_path):
            ck = torch.load(ckpt_path, map_location=device)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            state = ck["state"]
            log(f"resumed from {ckpt_path} at step {state['step']} ({state['elapsed'] / 60:.1f} min)")
        elif args.init_weights:
            ck = torch.load(args.init_weights, map_location=device)
            model.load_state_dict({k: v.float() for k, v in ck["model"].items()})
            state = ck["state"]
            rewarm_steps = 100  # fresh Adam moments: ramp the learning rate up again
            log(f"resumed weights only from {args.init_weights} at step {state['step']}; optimizer moments restart")
        else:
            raise SystemExit("--resume: no checkpoint found")

    def make_loader(examples, rows, row_len, workers):
        return torch.utils.data.DataLoader(
            BatchStream(examples, rows, row_len, 64, ids["mask"], ids["pad"], args.seed + state["step"]),
            batch_size=None, num_workers=workers, pin_memory=device.type == "cuda",
            **({"prefetch_factor": 4, "persistent_workers": False} if workers > 0 else {}),
        )

    long_examples = [e for e in data["train"] if e.packed_len(64) > preset["row_len"]] if preset.get("long_len") else []
    loader = make_loader(data["train"], preset["rows"], preset["row_len"], args.workers)
    long_batches = iter(make_loader(long_examples, preset["long_rows"], preset["long_len"], min(2, args.workers))) if long_examples else None
    log(f"{len(long_examples)} examples longer than {preset['row_len']} packed tokens" + (f": every {preset['long_every']}th step is {preset['long_rows']} rows of {preset['long_len']}" if long_batches is not None else ""))
    step_fn = batch_loss
    if args.compile and hasattr(torch, "compile"):
        step_fn = torch.compile(batch_loss, dynamic=True)

    loss_path = os.path.join(args.out, "loss.csv")
    new_file = not os.path.exists(loss_path) or not args.resume
    csv_f = open(loss_path, "w" if new_file else "a", newline="")
    writer = csv.writer(csv_f)
    if new_file:
        writer.writerow(["step", "minutes", "tokens", "lr", "loss", "chat_loss", "decision_loss", "decision_acc", "val_chat_loss", "val_decision_loss", "val_decision_acc"])
    total_s = args.train_minutes * 60
    stop_s = (args.stop_minutes if args.stop_minutes is not None else args.train_minutes) * 60
    last_ckpt = time.time()
    t_run = time.time()
    start_elapsed = state["elapsed"]
    start_step = state["step"]
    start_tokens = state["tokens"]
    acc_hist: List[tuple] = []
    model.train()

    def save(final: bool = False) -> None:
        torch.save({"config": cfg.to_json_dict(), "model": model.state_dict(), "optimizer": opt.state_dict(), "state": state}, ckpt_path)
        log(f"checkpoint {ckpt_path} at step {state['step']}{' (final)' if final else ''}")

    for batch in loader:
        elapsed = start_elapsed + (time.time() - t_run)
        if elapsed >= stop_s or (args.max_steps is not None and state["step"] >= args.max_steps):
            break
        if args.wall_minutes is not None and time.time() - T_START > args.wall_minutes * 60:
            log("wall-clock budget reached")
            break
        if long_batches is not None and state["step"] % preset["long_every"] == preset["long_every"] - 1:
            batch = next(long_batches)
        lr = lr_at(elapsed / total_s, preset["lr"])
        run_steps = state["step"] - start_step
        if run_steps < rewarm_steps:
            lr *= (run_steps + 1) / rewarm_steps
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            try:
                loss, c, d, acc, nc, nd = step_fn(model, batch, device, args.dec_weight)
            except Exception as e:  # torch.compile trouble: fall back to eager once
                if step_fn is batch_loss:
                    raise
                log(f"compile failed ({type(e).__name__}: {e}); eager from now on")
                step_fn = batch_loss
                loss, c, d, acc, nc, nd = step_fn(model, batch, device, args.dec_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] += 1
        state["tokens"] += int((batch["doc"] >= 0).sum())
        state["elapsed"] = start_elapsed + (time.time() - t_run)
        acc_hist.append((loss.item(), c.item(), d.item(), acc))
        if state["step"] % 50 == 0 or state["step"] == 1:
            m = np.nanmean(np.array(acc_hist, dtype=np.float64), axis=0)
            acc_hist = []
            row = [state["step"], round(state["elapsed"] / 60, 3), state["tokens"], f"{lr:.6f}"] + [f"{x:.4f}" for x in m]
            if state["step"] % 500 == 0:
                v = validate(model, data["val"], preset, ids, device, args.dec_weight)
                row += [f"{v['chat']:.4f}", f"{v['dec']:.4f}", f"{v['acc']:.4f}"]
            else:
                row += ["", "", ""]
            writer.writerow(row)
            csv_f.flush()
            rate = (state["tokens"] - start_tokens) / max(1e-9, time.time() - t_run)
            log(f"step {state['step']} {state['elapsed'] / 60:.2f}min {rate / 1e3:.0f}k tok/s lr {lr:.2e} loss {m[0]:.3f} chat {m[1]:.3f} dec {m[2]:.3f} acc {m[3]:.3f}"
                + (f" | val chat {row[-3]} dec {row[-2]} acc {row[-1]}" if row[-1] else ""))
        if time.time() - last_ckpt > args.ckpt_every_minutes * 60:
            save()
            last_ckpt = time.time()
    v = validate(model, data["val"], preset, ids, device, args.dec_weight, max_batches=40)
    log(f"final validation: {v}")
    writer.writerow([state["step"], round(state["elapsed"] / 60, 3), state["tokens"], "", "", "", "", "", f"{v['chat']:.4f}", f"{v['dec']:.4f}", f"{v['acc']:.4f}"])
    csv_f.close()
    save(final=True)
    if args.weights_out:
        torch.save({"config": cfg.to_json_dict(), "model": {k: v.detach().to(torch.bfloat16).cpu() for k, v in model.state_dict().items()},
                    "state": state}, args.weights_out)
        log(f"bf16 weights -> {args.weights_out}")
    with open(os.path.join(args.out, "train_state.json"), "w") as f:
        json.dump({**state, "parameters": model.num_parameters(), "preset": args.preset, "final_validation": v,
                   "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                   "torch": torch.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
