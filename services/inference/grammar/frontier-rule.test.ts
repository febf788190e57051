// The constrained commit rule against a brute-force reference: random small grammars over a
// tiny vocabulary, run once with XGrammar's matcher and once with a grammar state that knows
// the grammar's whole (finite) language and answers every question by enumerating it.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { commitAtFrontier, type FrontierInput, type GrammarState, maskedGuess, singleAllowed } from "./frontier-rule.js";
import { MatcherState } from "./matcher-state.js";
import { loadXGrammar, type GrammarCompiler, type XGrammar } from "./xgrammar.js";

const TEXT_TOKENS = ["a", "b", "c", "ab", "bc", "ca", "abc", "aa", "cc", "ba"];
const EOS = TEXT_TOKENS.length;
const MASK = EOS + 1;
const VOCAB = MASK + 1;
const banned = new Uint8Array(VOCAB);
banned[MASK] = 1;

type Tree = { lit: string } | { seq: [Tree, Tree] } | { alt: [Tree, Tree] } | { opt: Tree };

const treeArb: fc.Arbitrary<Tree> = fc.letrec<{ tree: Tree }>((tie) => ({
  tree: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.stringMatching(/^[abc]{1,3}$/).map((lit) => ({ lit })),
    fc.tuple(tie("tree"), tie("tree")).map((seq) => ({ seq })),
    fc.tuple(tie("tree"), tie("tree")).map((alt) => ({ alt })),
    tie("tree").map((opt) => ({ opt })),
  ),
})).tree;

function ebnf(t: Tree): string {
  if ("lit" in t) return JSON.stringify(t.lit);
  if ("seq" in t) return `(${ebnf(t.seq[0])} ${ebnf(t.seq[1])})`;
  if ("alt" in t) return `(${ebnf(t.alt[0])} | ${ebnf(t.alt[1])})`;
  return `(${ebnf(t.opt)})?`;
}

function language(t: Tree): Set<string> {
  if ("lit" in t) return new Set([t.lit]);
  if ("seq" in t) {
    const out = new Set<string>();
    for (const x of language(t.seq[0])) for (const y of language(t.seq[1])) out.add(x + y);
    return out;
  }
  if ("alt" in t) return new Set([...language(t.alt[0]), ...language(t.alt[1])]);
  return new Set(["", ...language(t.opt)]);
}

/** Greedy longest-match tokenization over the text tokens (both sides use it for forced text). */
function encode(text: string): number[] {
  const ids: number[] = [];
  let i = 0;
  while (i < text.length) {
    let best = -1;
    TEXT_TOKENS.forEach((tok, id) => {
      if (text.startsWith(tok, i) && (best < 0 || tok.length > TEXT_TOKENS[best]!.length)) best = id;
    });
    ids.push(best);
    i += TEXT_TOKENS[best]!.length;
  }
  return ids;
}

/** The reference: every answer by enumerating the language. */
class BruteForceState implements GrammarState {
  text = "";
  ended = false;
  constructor(private readonly lang: Set<string>) {}
  private continuations(): string[] {
    return [...this.lang].filter((s) => s.startsWith(this.text)).map((s) => s.slice(this.text.length));
  }
  private allows(token: number): boolean {
    if (this.ended || token === MASK) return false;
    if (token === EOS) return this.lang.has(this.text);
    return this.continuations().some((c) => c.startsWith(TEXT_TOKENS[token]!));
  }
  async allowed(): Promise<Int32Array> {
    const mask = new Int32Array(Math.ceil(VOCAB / 32));
    for (let v = 0; v < VOCAB; v++) if (this.allows(v)) mask[v >> 5]! |= 1 << (v & 31);
    return mask;
  }
  accept(token: number): boolean {
    if (!this.allows(token)) return false;
    if (token === EOS) this.ended = true;
    else this.text += TEXT_TOKENS[token]!;
    return true;
  }
  forcedText(): string {
    const rest = this.continuations();
    if (this.ended || rest.includes("")) return "";
    let common = rest[0]!;
    for (const r of rest) while (!r.startsWith(common)) common = common.slice(0, -1);
    return common;
  }
  terminated(): boolean {
    return this.ended;
  }
}

let xg: XGrammar;
let compiler: GrammarCompiler;

beforeAll(async () => {
  xg = await loadXGrammar();
  const info = await xg.TokenizerInfo.createTokenizerInfo([...TEXT_TOKENS, "", ""], "raw", false, VOCAB, [EOS]);
  compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
});

async function xgrammarState(tree: Tree): Promise<MatcherState> {
  const compiled = await compiler.compileGrammar(`root ::= ${ebnf(tree)}`);
  return new MatcherState(await xg.GrammarMatcher.createGrammarMatcher(compiled, [EOS], false, -1));
}

/** Logits for `room` positions: random, some positions sharply peaked (so runs form). */
const logitsArb = (room: number) =>
  fc
    .array(
      fc.tuple(
        fc.integer({ min: 0, max: VOCAB - 1 }),
        fc.double({ min: 0, max: 12, noNaN: true }),
        fc.array(fc.double({ min: -3, max: 3, noNaN: true }), { minLength: VOCAB, maxLength: VOCAB }),
      ),
      {
        minLength: room,
        maxLength: room,
      },
    )
    .map((rows) => {
      const out = new Float32Array(room * VOCAB);
      rows.forEach(([peak, height, noise], i) => {
        out.set(noise, i * VOCAB);
        out[i * VOCAB + peak]! += height;
      });
      return out;
    });

const ROOM = 6;
const input = (logits: Float32Array, threshold: number): FrontierInput => ({
  logits,
  offsets: Array.from({ length: ROOM }, (_, i) => i * VOCAB),
  vocab: VOCAB,
  banned,
  threshold,
  encode,
});

describe("constrained commit rule vs a brute-force reference", () => {
  it("XGrammar's answers match the enumerated language on random small grammars", async () => {
    await fc.assert(
      fc.asyncProperty(fc.tuple(fc.stringMatching(/^[abc]{1,2}$/), treeArb), async ([head, body]) => {
        const tree: Tree = { seq: [{ lit: head }, body] };
        const lang = language(tree);
        fc.pre(lang.size <= 64);
        const state = await xgrammarState(tree);
        const ref = new BruteForceState(lang);
        // Walk a random valid path, comparing the masks and the forced text at each state.
        for (let step = 0; step < 12 && !ref.terminated(); step++) {
          expect(allowedIds(await state.allowed())).toEqual(allowedIds(await ref.allowed()));
          // XGrammar's jump-forward may stop early (at a rule boundary), never go too far.
          expect(ref.forcedText().startsWith(state.forcedText())).toBe(true);
          const mask = await ref.allowed();
          const options = Array.from({ length: VOCAB }, (_, v) => v).filter((v) => (mask[v >> 5]! >>> (v & 31)) & 1);
          const pick = options[(step * 7 + lang.size) % options.length]!;
          expect(state.accept(pick)).toBe(true);
          ref.accept(pick);
        }
        state.dispose();
      }),
      { numRuns: 60, seed: 13 },
    );
  });

  it("the rule commits what the reference rule commits (both over the enumerated language)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(fc.stringMatching(/^[abc]{1,2}$/), treeArb),
        fc.array(logitsArb(ROOM), { minLength: 1, maxLength: 6 }),
        fc.constantFrom(0.3, 0.6, 0.9),
        async ([head, body], steps, threshold) => {
          const lang = language({ seq: [{ lit: head }, body] });
          fc.pre(lang.size <= 64);
          const state = new BruteForceState(lang);
          const ref = new BruteForceState(lang);
          for (const logits of steps) {
            if (ref.terminated()) break;
            expect(await commitAtFrontier(state, input(logits, threshold))).toEqual(await referenceRule(ref, logits, threshold));
          }
        },
      ),
      { numRuns: 150, seed: 15 },
    );
  });

  it("over XGrammar, every step commits at least one token, only valid prefixes, the end only in the language", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(fc.stringMatching(/^[abc]{1,2}$/), treeArb),
        fc.array(logitsArb(ROOM), { minLength: 1, maxLength: 6 }),
        fc.constantFrom(0.3, 0.6, 0.9),
        async ([head, body], steps, threshold) => {
          const tree: Tree = { seq: [{ lit: head }, body] };
          const lang = language(tree);
          fc.pre(lang.size <= 64);
          const state = await xgrammarState(tree);
          const ref = new BruteForceState(lang);
          for (const logits of steps) {
            if (ref.terminated()) break;
            const got = await commitAtFrontier(state, input(logits, threshold));
            expect(got.deadEnd).toBe(false);
            expect(got.tokens.length).toBeGreaterThanOrEqual(1);
            for (const token of got.tokens) expect(ref.accept(token)).toBe(true);
            // The committed text is a prefix of the language; the end only where it may end.
            expect([...lang].some((s) => s.startsWith(ref.text))).toBe(true);
            if (ref.terminated()) expect(lang.has(ref.text)).toBe(true);
          }
          state.dispose();
        },
      ),
      { numRuns: 80, seed: 14 },
    );
  });
});

/**
 * The rule as the documentation states it, written independently over the reference state:
 * forced text first; then guesses (the best allowed token, its probability renormalized over
 * the allowed ones by direct summation); the first guess always, later ones at the threshold;
 * after a guess below it only forced text.
 */
async function referenceRule(ref: BruteForceState, logits: Float32Array, threshold: number) {
  const out = { tokens: [] as number[], forced: 0, deadEnd: false };
  const forced = async () => {
    for (;;) {
      if (out.tokens.length >= ROOM || ref.terminated()) return;
      const text = ref.forcedText();
      const ids = text === "" ? [] : encode(text).slice(0, ROOM - out.tokens.length);
      if (ids.length > 0) {
        for (const id of ids) ref.accept(id);
        out.tokens.push(...ids);
        out.forced += ids.length;
        continue;
      }
      const allowed = [...Array(VOCAB).keys()].filter((v) => v !== MASK && allowedBy(ref, v));
      if (allowed.length !== 1) return;
      ref.accept(allowed[0]!);
      out.tokens.push(allowed[0]!);
      out.forced++;
    }
  };
  let guessing = true;
  let guessed = 0;
  for (;;) {
    await forced();
    if (!guessing || out.tokens.length >= ROOM || ref.terminated()) break;
    const at = out.tokens.length * VOCAB;
    const allowed = [...Array(VOCAB).keys()].filter((v) => v !== MASK && allowedBy(ref, v));
    let best = allowed[0]!;
    for (const v of allowed) if (logits[at + v]! > logits[at + best]!) best = v;
    const z = allowed.reduce((s, v) => s + Math.exp(logits[at + v]! - logits[at + best]!), 0);
    const p = 1 / z;
    if (guessed > 0 && p < threshold) break;
    ref.accept(best);
    out.tokens.push(best);
    guessed++;
    if (p < threshold) guessing = false;
  }
  return out;
}

function allowedIds(mask: Int32Array): number[] {
  return [...Array(VOCAB).keys()].filter((v) => ((mask[v >> 5]! >>> (v & 31)) & 1) === 1);
}

function allowedBy(ref: BruteForceState, v: number): boolean {
  const copy = new BruteForceState(new Set());
  Object.assign(copy, ref);
  return copy.accept(v);
}

describe("mask helpers", () => {
  it("maskedGuess renormalizes over the allowed tokens and skips banned ones", () => {
    const logits = Float32Array.from([0, 2, 1, 5]);
    const mask = Int32Array.of(0b0111);
    const b = new Uint8Array(4);
    b[1] = 1;
    const g = maskedGuess(logits, 0, 4, b, mask)!;
    expect(g.token).toBe(2);
    expect(g.confidence).toBeCloseTo(Math.exp(1) / (Math.exp(0) + Math.exp(1)), 6);
    expect(maskedGuess(logits, 0, 4, b, Int32Array.of(0b0010))).toBeUndefined();
  });

  it("singleAllowed finds the one allowed token", () => {
    expect(singleAllowed(Int32Array.of(0, 1 << 5), 64)).toBe(37);
    expect(singleAllowed(Int32Array.of(0, 0), 64)).toBeUndefined();
    expect(singleAllowed(Int32Array.of(1, 1), 64)).toBeUndefined();
    expect(singleAllowed(Int32Array.of(-2147483648), 32)).toBe(31);
    // Bits past the vocabulary do not count.
    expect(singleAllowed(Int32Array.of(0, -4096 | 4), 44)).toBe(34);
  });
});
