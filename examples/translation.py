"""An encoder-decoder Transformer of the DCT paper's translation model
(fairseq's IWSLT'14 De-En: 6 + 6 post-norm layers, FFN 512-1024-512, 4
heads, shared decoder embeddings; scaled down by flags to fit a CPU), trained
on the synthetic language pair of translation_data.py, with

- DCT-MP after the FFN ReLUs at the paper's places (Table 4): --splits 1
  cuts encoder layer 5; 2 also decoder layer 5; 4 also encoder and decoder
  layer 3 (2, 3 and 5 model-parallel workers). The cuts run in one process
  (sparq.torch.DctMp: the wire round trip, bytes counted); a pipeline over
  processes would also carry the residual stream across each cut, which the
  paper does not count and neither does this.
- or data parallelism under torchrun with a sparq DDP hook (--hook
  topk:K/B: SparCML's TopK SGD; none: sparq's dense allreduce).

Reports the train and test loss (per-token cross-entropy in nats, teacher
forced), BLEU of greedy decoding on the test set (sacrebleu), and bytes per
cut or of the gradient exchange; --out appends one JSON line per run.

    python examples/translation.py --splits 2 --eta 0.95 --seed 1 [--values bf16]
    torchrun --nproc_per_node 2 examples/translation.py --hook topk:4/512
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translation_data import make_corpus  # noqa: E402

PAD, BOS, EOS, UNK = 0, 1, 2, 3
ADAM_BETAS = (0.9, 0.98)  # fairseq's
CUTS = {0: [], 1: [("enc", 5)], 2: [("enc", 5), ("dec", 5)], 4: [("enc", 3), ("dec", 3), ("enc", 5), ("dec", 5)]}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=6, help="encoder layers = decoder layers")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=256, help="FFN inner width (the cut's width)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--splits", type=int, default=0, choices=sorted(CUTS), help="DCT-MP cuts (0: none)")
    ap.add_argument("--eta", type=float, default=0.9, help="DCT-MP sparsity at the cuts")
    ap.add_argument("--narrow-cuts", type=int, metavar="W",
                    help="no DCT-MP: the FFNs at --splits's cut places are W wide instead of --ffn (the dense "
                         "model that a cut keeping W values a token is compared with)")
    ap.add_argument("--values", choices=["f32", "bf16"], default="f32",
                    help="DCT-MP's values on the wire (bf16: sparq's extension)")
    ap.add_argument("--hook", help="data parallel under torchrun: a sparq --dp-codec (none, topk:K/B, ...)")
    ap.add_argument("--train-pairs", type=int, default=12000)
    ap.add_argument("--test-pairs", type=int, default=1000)
    ap.add_argument("--data-seed", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1, help="the model's initialisation and batch order")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64, help="sentence pairs per (global) batch")
    ap.add_argument("--optimizer", choices=["adam", "sgd", "sgd-mc", "adam-pre"], default="adam",
                    help="adam (fairseq's), sgd with momentum 0.9 (what TopK SGD with error feedback assumes), "
                         "sgd-mc: the same momentum applied to each rank's gradients before the exchange (DGC's "
                         "momentum correction), or adam-pre: each rank's Adam direction (its own moments) handed "
                         "to the exchange, so that error feedback acts on updates; the last two data parallel "
                         "only, the optimizer then plain SGD")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100, help="test loss every this many steps (the curve)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="append the run's results as one JSON line")
    args = ap.parse_args(argv)
    deepest = max((n for _, n in CUTS[args.splits]), default=0)
    if args.layers < deepest:
        ap.error(f"--splits {args.splits} cuts layer {deepest}: --layers {args.layers} has too few")
    if args.narrow_cuts is not None and not (args.splits and 0 < args.narrow_cuts <= args.ffn):
        ap.error(f"--narrow-cuts {args.narrow_cuts}: needs --splits and a width in 1..--ffn ({args.ffn})")
    if args.splits and args.hook:
        ap.error("--splits (model parallel) and --hook (data parallel) are separate experiments")
    return args


class Vocab:
    def __init__(self, sentences):
        words = sorted({w for s in sentences for w in s.split()})
        self.words = ["<pad>", "<bos>", "<eos>", "<unk>"] + words
        self.index = {w: i for i, w in enumerate(self.words)}

    def encode(self, s):
        return [self.index.get(w, UNK) for w in s.split()] + [EOS]

    def decode(self, ids):
        out = []
        for i in ids:
            if i == EOS:
                break
            out.append(self.words[i])
        return " ".join(out)


def pad(seqs, prefix=()):
    n = max(len(s) for s in seqs) + len(prefix)
    return torch.tensor([list(prefix) + s + [PAD] * (n - len(s) - len(prefix)) for s in seqs])


def positions(n, d):
    pos = torch.arange(n).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


class FFN(nn.Module):
    """fc1, ReLU, [the DCT-MP cut], fc2: the paper puts the cut after the ReLU."""

    def __init__(self, d, inner, dropout, cut):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(d, inner), nn.Linear(inner, d), nn.Dropout(dropout)
        self.cut = cut if cut is not None else nn.Identity()

    def forward(self, x):
        return self.drop(self.fc2(self.cut(torch.relu(self.fc1(x)))))


class Layer(nn.Module):
    """A post-norm Transformer layer (fairseq's default): self-attention,
    cross-attention (decoder), FFN, each in a residual with LayerNorm."""

    def __init__(self, a, cross, cut, inner):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(a.d_model, a.heads, dropout=a.dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(a.d_model, a.heads, dropout=a.dropout, batch_first=True) \
            if cross else None
        self.ffn = FFN(a.d_model, inner, a.dropout, cut)
        self.norms = nn.ModuleList(nn.LayerNorm(a.d_model) for _ in range(3 if cross else 2))
        self.drop = nn.Dropout(a.dropout)

    def forward(self, x, pad_mask, memory=None, memory_pad=None, causal=None):
        x = self.norms[0](x + self.drop(self.self_attn(x, x, x, key_padding_mask=pad_mask, attn_mask=causal,
                                                       need_weights=False)[0]))
        if self.cross_attn is not None:
            x = self.norms[1](x + self.drop(self.cross_attn(x, memory, memory, key_padding_mask=memory_pad,
                                                            need_weights=False)[0]))
        return self.norms[-1](x + self.ffn(x))


class Transformer(nn.Module):
    def __init__(self, a, src_vocab, tgt_vocab, cuts):
        super().__init__()
        self.d = a.d_model
        self.src_emb = nn.Embedding(src_vocab, a.d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(tgt_vocab, a.d_model, padding_idx=PAD)
        nn.init.normal_(self.src_emb.weight, 0, a.d_model ** -0.5)
        nn.init.normal_(self.tgt_emb.weight, 0, a.d_model ** -0.5)
        narrow = set(CUTS[a.splits]) if a.narrow_cuts else set()
        width = lambda place: a.narrow_cuts if place in narrow else a.ffn  # noqa: E731
        self.enc = nn.ModuleList(Layer(a, False, cuts.get(("enc", i + 1)), width(("enc", i + 1)))
                                 for i in range(a.layers))
        self.dec = nn.ModuleList(Layer(a, True, cuts.get(("dec", i + 1)), width(("dec", i + 1)))
                                 for i in range(a.layers))
        self.register_buffer("pe", positions(256, a.d_model), persistent=False)
        self.drop = nn.Dropout(a.dropout)

    def embed(self, emb, ids):
        return self.drop(emb(ids) * math.sqrt(self.d) + self.pe[: ids.shape[1]])

    def encode(self, src):
        pad_mask = src == PAD
        x = self.embed(self.src_emb, src)
        for layer in self.enc:
            x = layer(x, pad_mask)
        return x, pad_mask

    def decode(self, prev, memory, memory_pad):
        n = prev.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)  # True: may not attend
        x = self.embed(self.tgt_emb, prev)
        for layer in self.dec:
            x = layer(x, prev == PAD, memory, memory_pad, causal)
        return x @ self.tgt_emb.weight.t()  # shared input/output embedding

    def forward(self, src, prev):
        memory, memory_pad = self.encode(src)
        return self.decode(prev, memory, memory_pad)


def batches(pairs, size, rng):
    order = list(range(len(pairs)))
    rng.shuffle(order)
    for i in range(0, len(order) - size + 1, size):
        yield [pairs[j] for j in order[i:i + size]]


def tensors(batch):
    src = pad([s for s, _ in batch])
    tgt = pad([t for _, t in batch])
    prev = pad([t[:-1] for _, t in batch], prefix=(BOS,))
    return src, prev, tgt


@torch.no_grad()
def test_loss(model, pairs, size=200):
    model.eval()
    total, tokens = 0.0, 0
    for i in range(0, len(pairs), size):
        src, prev, tgt = tensors(pairs[i:i + size])
        logits = model(src, prev)
        total += nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD,
                                             reduction="sum").item()
        tokens += int((tgt != PAD).sum())
    model.train()
    return total / tokens


@torch.no_grad()
def greedy(model, pairs, vocab, size=200):
    model.eval()
    out = []
    for i in range(0, len(pairs), size):
        src = pad([s for s, _ in pairs[i:i + size]])
        memory, memory_pad = model.encode(src)
        prev = torch.full((src.shape[0], 1), BOS)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(src.shape[1] + 10):
            nxt = model.decode(prev, memory, memory_pad)[:, -1].argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
            prev = torch.cat([prev, nxt[:, None]], dim=1)
            done |= nxt == EOS
            if done.all():
                break
        out += [vocab.decode(row[1:].tolist()) for row in prev]
    model.train()
    return out


def setup_data(a):
    train = make_corpus(a.train_pairs, a.data_seed)
    test = make_corpus(a.test_pairs, a.data_seed + 1000)
    sv, tv = Vocab(s for s, _ in train), Vocab(t for _, t in train)
    enc = lambda pairs: [(sv.encode(s), tv.encode(t)) for s, t in pairs]  # noqa: E731
    return enc(train), enc(test), [t for _, t in test], sv, tv


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    ddp = a.hook is not None
    rank, world = 0, 1
    if ddp or a.splits:  # the hook and the cuts; the unsplit model runs without sparq
        import sparq.torch as st
    if ddp:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        if a.batch_size % world:
            sys.exit(f"translation.py: --batch-size {a.batch_size} is not a multiple of {world} ranks")
    train, test, refs, sv, tv = setup_data(a)
    torch.manual_seed(a.seed)
    cuts = {}
    if a.splits and not a.narrow_cuts:
        cuts = {c: st.DctMp(a.eta, f"{c[0]}{c[1]}", values=a.values) for c in CUTS[a.splits]}
    model = Transformer(a, len(sv.words), len(tv.words), cuts)
    net, hook = model, None
    if ddp:
        net = nn.parallel.DistributedDataParallel(model)
        hook = st.Hook(a.hook, model=net)
        wrap = {"sgd-mc": lambda h: st.momentum_before_exchange(h, 0.9),
                "adam-pre": lambda h: st.adam_before_exchange(h, betas=ADAM_BETAS)}
        net.register_comm_hook(state=None, hook=wrap.get(a.optimizer, lambda h: h)(hook))
    elif a.optimizer in ("sgd-mc", "adam-pre"):
        raise SystemExit(f"--optimizer {a.optimizer}: the optimizer's state goes into the data-parallel exchange "
                         "(run with --hook)")
    if a.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=ADAM_BETAS, eps=1e-8)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9 if a.optimizer == "sgd" else 0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / a.warmup, math.sqrt(a.warmup / (s + 1))))
    rng = random.Random(a.seed)
    curve, step, t0 = [], 0, time.perf_counter()
    for epoch in range(a.epochs):
        nll_sum, tok_sum = 0.0, 0
        for batch in batches(train, a.batch_size, rng):
            share = len(batch) // world
            src, prev, tgt = tensors(batch[rank * share:(rank + 1) * share])
            logits = net(src, prev)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD,
                                               label_smoothing=a.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            with torch.no_grad():
                n = int((tgt != PAD).sum())
                nll_sum += nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD,
                                                       reduction="sum").item()
                tok_sum += n
            if step % a.eval_every == 0:
                curve.append((step, test_loss(model, test)))
        train_loss = nll_sum / tok_sum
        if rank == 0:
            print(f"epoch {epoch + 1}: step {step}, train loss {train_loss:.4f}, test loss {curve[-1][1]:.4f}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    result = report(a, model, test, refs, tv, train_loss, curve, cuts, hook, step, time.perf_counter() - t0)
    if rank == 0:
        print(json.dumps({k: v for k, v in result.items() if k != "curve"}), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(result) + "\n")
    if ddp:
        dist.destroy_process_group()


def report(a, model, test, refs, tv, train_loss, curve, cuts, hook, steps, seconds):
    import sacrebleu

    hyps = greedy(model, test, tv)
    result = {
        "splits": a.splits, "eta": a.eta if cuts else None, "values": a.values if cuts else None,
        "narrow_cuts": a.narrow_cuts,
        "hook": a.hook, "seed": a.seed,
        "layers": a.layers, "d_model": a.d_model, "ffn": a.ffn, "epochs": a.epochs, "steps": steps,
        "batch_size": a.batch_size, "optimizer": a.optimizer, "lr": a.lr, "train_loss": train_loss, "test_loss": test_loss(model, test),
        "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "seconds": seconds, "curve": curve,
        "example": [refs[0], hyps[0]],
    }
    if cuts:
        result["cuts"] = [c.stats.as_dict() for c in cuts.values()]
    if hook is not None:
        hook.wait()
        result["grad_bytes_sent"], result["grad_dense_bytes"] = hook.bytes_sent, hook.dense_bytes
    return result


if __name__ == "__main__":
    main()
