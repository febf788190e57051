import { ConstrainedSpan } from "../grammar/constrained-span.js";
import type { GrammarReport } from "../grammar/sequence-grammar.js";
import type { ForwardOutputs } from "./forward.js";
import { createKVCache, type KVCache, replyRoom } from "./kv-cache.js";
import { type CommittedLogprob, logprobsAt } from "./logprobs.js";
import { type Commit, type Guess, mostConfident, type StepContext } from "./policies/policy.js";
import { cutAtStop, ReplyText, tokensSent } from "./reply-text.js";
import type { BlockText, DecodeModel, Finished, FinishReason, SequenceParams, StepResult } from "./sequence-types.js";
import { bannedTokenIds, bannedTokens } from "../core/banned-tokens.js";
import { checkCommits, maskedGuesses } from "./unmask.js";

export type { BlockText, DecodeModel, Finished, FinishReason, SequenceParams, StepResult };

/**
 * One reply being denoised (docs/architecture.md §5). The prompt's complete blocks are prefilled into
 * the KV cache; its tail shares the first generation block and is never masked. Each step
 * the current block's masked positions are guessed and the unmasking policy chooses which
 * to commit (at least one).
 * When a block has no mask left, the next step's row is that block's 64 clean tokens
 * followed by the next block, all masked: one forward writes the clean KV and denoises.
 *
 * With a logits shift (Fast-dLLM v2: row i predicts token i + 1) a block's first token is
 * predicted by the previous block's last row: it is committed alone, greedily, by the fused
 * forward (as an autoregressive step), and a prompt that ends on a block boundary keeps its
 * last block out of the prefill so that this forward holds it.
 */
export class Sequence {
  readonly kv: KVCache;
  readonly promptLength: number;
  /** Prompt tokens in complete blocks: prefilled, never part of a step row. */
  readonly promptBlocks: number;
  /** Absolute position of the reply's first block. */
  readonly firstBlockStart: number;
  forwardPasses = 0;
  done = false;
  /** Positions committed by the last denoising step. */
  lastCommitted = 0;
  /** Denoising steps the last completed (or final) block took. */
  lastBlockSteps = 0;

  private readonly banned: Uint8Array;
  private readonly text: ReplyText;
  private blockStart: number;
  private block: number[];
  private masked: boolean[];
  private pendingClean: number[] | null = null;
  private readonly replyDone: number[] = [];
  private blockIndex = 0;
  private stopCheckedUpTo = 0;
  /** The guesses of the current block's earlier steps, for the policy. */
  private history: Guess[][] = [];
  /** With `logprobs`: entries of the completed blocks' reply tokens, of the current block's positions, and how many were sent. */
  private readonly replyLogprobs: CommittedLogprob[] = [];
  private blockLogprobs: (CommittedLogprob | undefined)[] = [];
  private logprobsSent = 0;
  private steps = 0;
  private readonly span: ConstrainedSpan | undefined;
  private readonly stops: Set<number>;
  private readonly shift: 0 | 1;

  constructor(
    private readonly model: DecodeModel,
    private readonly params: SequenceParams,
  ) {
    const { blockSize } = model;
    const n = params.prompt.length;
    if (n >= model.maxPositions) throw new Error("prompt fills the context");
    this.promptLength = n;
    this.shift = model.logitsShift ?? 0;
    this.stops = new Set(model.stopTokenIds ?? [model.eosTokenId]);
    const aligned = this.shift === 1 && n > 0 && n % blockSize === 0;
    this.promptBlocks = aligned ? n - blockSize : Math.floor(n / blockSize) * blockSize;
    this.kv = createKVCache(model, Math.min(model.maxPositions, this.promptBlocks + replyRoom(params.maxTokens, blockSize)), {
      sizeClass: true,
    });
    this.banned = bannedTokens(model.vocabSize, bannedTokenIds(model));
    this.text = new ReplyText(params.decode, params.stops);
    this.blockStart = this.promptBlocks;
    this.block = [];
    this.masked = [];
    if (aligned) {
      // The prompt's last block is the fused forward's clean part; the reply's first block follows.
      this.pendingClean = params.prompt.slice(this.promptBlocks) as number[];
      this.blockStart = n;
      this.openBlock([]);
    } else {
      this.openBlock(params.prompt.slice(this.promptBlocks));
    }
    this.firstBlockStart = this.blockStart;
    if (params.grammar !== undefined) this.span = new ConstrainedSpan(params.grammar, model.vocabSize);
  }

  /**
   * Before a forward: commits what the grammar forces at the frontier (jump-forward), never
   * the block's last position, so the block is completed by a step as usual. The result
   * carries `finished` when that ended the reply (an end of turn the grammar forced).
   */
  async prepareStep(): Promise<StepResult> {
    if (this.span === undefined || !this.span.active || this.done) return {};
    const room = this.masked.lastIndexOf(true);
    const commits = await this.span.jumpForward(this.masked.slice(0, room));
    for (const c of commits) {
      this.block[c.index] = c.token;
      this.masked[c.index] = false;
    }
    const finished = commits.length > 0 ? this.checkFinished() : undefined;
    return finished !== undefined ? { finished } : {};
  }

  /** After a forward, before applyStep: the grammar's commits from the frontier (they replace the policy's). */
  async constrainStep(out: ForwardOutputs, row: number, seq: number): Promise<void> {
    if (this.span === undefined || !this.span.active || this.done) return;
    if (out.logits === undefined) throw new Error("a constrained step needs the logits");
    // With a logits shift a position's prediction is the row before it.
    await this.span.step(out.logits, row * seq + (this.pendingClean?.length ?? 0) - this.shift, this.masked);
  }

  /** Whether this step decodes under the grammar (constrainStep has work to do). */
  get constrained(): boolean {
    return this.span?.active === true && !this.done;
  }

  /** Releases the grammar matcher and the key/value cache (the sequence left the scheduler). */
  release(): void {
    this.span?.dispose();
    this.kv.dispose();
  }

  /** The next prompt tokens to prefill: whole blocks, at most `chunk` tokens (at least one block). */
  prefillChunk(chunk: number): number[] {
    const { blockSize } = this.model;
    const from = this.kv.length;
    const to = Math.min(this.promptBlocks, from + Math.max(blockSize, Math.floor(chunk / blockSize) * blockSize));
    return this.params.prompt.slice(from, to) as number[];
  }

  get prefilled(): boolean {
    return this.kv.length >= this.promptBlocks;
  }

  /** Stores the present KV of a prefill row of `count` tokens. */
  applyPrefill(out: ForwardOutputs, row: number, past: number, seq: number, count: number): void {
    this.kv.append(out.present!, row, past + seq, past, count);
  }

  /**
   * The current tokens of this sequence's next denoising row. An autoregressive model (block
   * size 1 with a logits shift) predicts its one masked position from the clean token before it,
   * so the row is that token alone: the masked slot's own row would be computed and never read.
   */
  stepTokens(): number[] {
    if (this.pendingClean === null) return this.block;
    return this.autoregressive ? this.pendingClean : [...this.pendingClean, ...this.block];
  }

  private get autoregressive(): boolean {
    return this.shift === 1 && this.model.blockSize === 1;
  }

  /** Whether the next step writes a committed block's KV (needs the present outputs). */
  get commitsBlock(): boolean {
    return this.pendingClean !== null;
  }

  /** The current block, for inspection: absolute start position, tokens, masked flags. */
  currentBlock(): { start: number; tokens: readonly number[]; masked: readonly boolean[] } {
    return { start: this.blockStart, tokens: [...this.block], masked: [...this.masked] };
  }

  /** Applies a forward's output (readout or logits) to this sequence: row `row` of a forward of shape P, S. */
  applyStep(out: ForwardOutputs, row: number, past: number, seq: number): StepResult {
    const { blockSize } = this.model;
    let offset = row * seq;
    if (this.pendingClean !== null) {
      this.kv.append(out.present!, row, past + seq, past, this.pendingClean.length);
      offset += this.pendingClean.length;
      this.pendingClean = null;
    }
    const commits = this.span?.take() ?? this.choose(out, offset, row * seq);
    this.steps++;
    for (const c of commits) {
      this.block[c.index] = c.token;
      this.masked[c.index] = false;
      if (this.params.logprobs !== undefined) this.recordLogprob(out, offset + c.index - this.shift, c.index, c.token);
    }
    this.lastCommitted = commits.length;
    if (this.span?.report.deadEnd === true) return { finished: this.finishAtFrontier() };
    if (this.span !== undefined && !this.span.active) this.openConstraint();
    const finished = this.checkFinished();
    if (finished !== undefined) {
      this.lastBlockSteps = this.history.length;
      return { finished };
    }

    if (this.masked.includes(true)) return {};
    // The block is complete.
    const firstReply = Math.max(0, this.promptLength - this.blockStart);
    for (let j = firstReply; j < this.block.length; j++) this.replyDone.push(this.block[j]!);
    const block: BlockText = {
      blockIndex: this.blockIndex,
      text: this.text.blockDelta(this.replyDone),
      replyTokens: this.replyDone.length,
    };
    if (this.params.logprobs !== undefined) block.logprobs = this.blockLogprobsSent(firstReply);
    if (this.blockStart + this.block.length >= this.model.maxPositions) {
      return { block, finished: this.finish("length", this.replyDone.length) };
    }
    this.pendingClean = this.block;
    this.lastBlockSteps = this.history.length;
    this.blockStart += blockSize;
    this.blockIndex++;
    this.openBlock([]);
    return { block };
  }

  /** The unmasking policy's label (metrics). */
  get policyName(): string {
    return this.params.policy.name;
  }

  /** Whether the next step needs the logits rather than the greedy readout. */
  get wantsLogits(): boolean {
    const policy = this.params.policy;
    return policy.needsLogits === true || (policy.topK ?? 1) > 1 || this.constrained || this.params.logprobs !== undefined;
  }

  private recordLogprob(out: ForwardOutputs, slot: number, index: number, token: number): void {
    if (out.logits === undefined) throw new Error("logprobs need the forward's logits");
    const V = this.model.vocabSize;
    const { logprob, top } = logprobsAt(out.logits, slot * V, V, this.banned, token, this.params.logprobs!.top);
    this.blockLogprobs[index] = { token, logprob, top, step: this.steps };
  }

  /**
   * Moves the completed block's entries to the reply's and returns those of the tokens whose
   * text has been sent (a held-back end may still be trimmed by a stop sequence).
   */
  private blockLogprobsSent(firstReply: number): CommittedLogprob[] {
    for (let j = firstReply; j < this.block.length; j++) this.replyLogprobs.push(this.blockLogprobs[j]!);
    const lo = tokensSent(this.replyDone, this.logprobsSent, this.text.sentLength, this.params.decode);
    const entries = this.replyLogprobs.slice(this.logprobsSent, lo);
    this.logprobsSent = lo;
    return entries;
  }

  /** The entries not sent yet of the final reply's first `end` tokens. */
  private finalLogprobs(end: number): CommittedLogprob[] {
    const firstReply = Math.max(0, this.promptLength - this.blockStart);
    const all = [...this.replyLogprobs, ...(this.blockLogprobs.slice(firstReply) as CommittedLogprob[])];
    return all.slice(this.logprobsSent, end);
  }

  /** The policy's commits for this step; `offset` is the block's first slot in the output. */
  private choose(out: ForwardOutputs, blockOffset: number, rowStart: number): Commit[] {
    const policy = this.params.policy;
    const V = this.model.vocabSize;
    const logits = out.logits;
    // Where position j's prediction is: its own row, or the row before with a logits shift.
    const offset = blockOffset - this.shift;
    if (this.masked.some((m, j) => m && offset + j < rowStart))
      throw new Error("a masked position's predicting row is not in this forward");
    const guesses = maskedGuesses(out, offset, this.masked, V, this.banned, policy.topK ?? 1);
    if (this.shift === 1 && this.masked[0]) {
      // The previous block's last row is final: its greedy guess is the first token (an autoregressive step).
      this.history.push(guesses);
      return [{ index: 0, token: guesses[0]!.token }];
    }
    const ctx: StepContext = {
      block: {
        tokens: this.block,
        masked: this.masked,
        replyStart: Math.max(0, this.promptLength - this.blockStart),
        start: this.blockStart,
      },
      guesses,
      history: this.history,
      eosTokenId: this.model.eosTokenId,
      ...(logits !== undefined ? { logitsAt: (j: number) => logits.subarray((offset + j) * V, (offset + j + 1) * V) } : {}),
    };
    let commits = policy.choose(ctx);
    this.history.push(guesses);
    checkCommits(commits, this.masked, this.banned, policy.name);
    if (commits.length === 0 && guesses.length > 0) {
      const best = mostConfident(guesses)!;
      commits = [{ index: best.index, token: best.token }];
    }
    return commits;
  }

  private openBlock(fixed: readonly number[]): void {
    const length = Math.min(this.model.blockSize, this.model.maxPositions - this.blockStart);
    this.block = new Array<number>(length).fill(this.model.maskTokenId);
    this.masked = new Array<boolean>(length).fill(true);
    this.history = [];
    this.blockLogprobs = [];
    for (let j = 0; j < fixed.length; j++) {
      this.block[j] = fixed[j]!;
      this.masked[j] = false;
    }
  }

  /** Reply tokens `[0, end)`: the completed blocks, then the current one. */
  private reply(end: number): number[] {
    if (end <= this.replyDone.length) return this.replyDone.slice(0, end);
    const firstReply = Math.max(0, this.promptLength - this.blockStart);
    return [...this.replyDone, ...this.block.slice(firstReply, firstReply + end - this.replyDone.length)];
  }

  /** End of turn, stop sequence or max_tokens, each once nothing before it is masked. */
  private checkFinished(): Finished | undefined {
    const firstReply = Math.max(0, this.promptLength - this.blockStart);
    let contiguous = this.replyDone.length;
    let eos: number | undefined;
    for (let j = firstReply; j < this.block.length && !this.masked[j]; j++) {
      if (eos === undefined && this.stops.has(this.block[j]!)) eos = contiguous;
      contiguous++;
    }
    const limit = Math.min(contiguous, this.params.maxTokens, eos ?? Infinity);

    const stops = this.params.stops;
    if (!stops.empty && limit > this.stopCheckedUpTo) {
      // Only text that includes new tokens can hold a new match; earlier text was checked.
      const from = Math.max(0, this.stopCheckedUpTo - (4 * stops.maxLength + 8));
      const window = this.params.decode(this.reply(limit).slice(from));
      this.stopCheckedUpTo = limit;
      if (stops.find(window) !== undefined) return this.finishAtStop(limit);
    }
    if (eos !== undefined && eos < this.params.maxTokens) return this.finish("stop", eos);
    if (contiguous >= this.params.maxTokens) return this.finish("length", this.params.maxTokens);
    return undefined;
  }

  private finish(reason: FinishReason, end: number): Finished {
    this.done = true;
    const tokens = this.reply(end);
    const text = this.params.decode(tokens);
    return { reason, completionTokens: end, last: this.lastPiece(text, end), text, tokens, ...this.grammarReport() };
  }

  private grammarReport(): { grammar?: GrammarReport } {
    return this.span === undefined ? {} : { grammar: { ...this.span.report } };
  }

  /**
   * While the reply thinks freely: an end of turn becomes the end of the thinking span (a
   * constrained reply must still give its answer), and once `</think>` is committed with
   * nothing masked before it, the constraint opens. The tokens already committed after it
   * in this block are masked again and handed to the grammar, which commits them back before
   * the next forward (jump-forward) up to the first it refuses; the constrained span is then
   * decoded from its frontier like any other. (The grammar may live on its worker thread, so
   * it answers only in the asynchronous hooks around the forward.)
   */
  private openConstraint(): void {
    const span = this.span!;
    const end = span.freeUntil!;
    const firstReply = Math.max(0, this.promptLength - this.blockStart);
    for (let j = firstReply; j < this.block.length; j++) {
      if (!this.masked[j] && this.block[j] === this.model.eosTokenId) this.block[j] = end;
    }
    // A close in an earlier block opened the constraint in the step that completed that block.
    let close = -1;
    for (let j = firstReply; j < this.block.length && !this.masked[j]; j++) {
      if (this.block[j] === end) {
        close = j;
        break;
      }
    }
    if (close < 0) return;
    const after: number[] = [];
    for (let j = close + 1; j < this.block.length && !this.masked[j]; j++) after.push(this.block[j]!);
    span.open(after);
    for (let j = close + 1; j < this.block.length; j++) {
      this.block[j] = this.model.maskTokenId;
      this.masked[j] = true;
    }
  }

  /** A grammar dead end: the reply ends with what is committed (all of it valid). */
  private finishAtFrontier(): Finished {
    const firstReply = Math.max(0, this.promptLength - this.blockStart);
    let end = this.replyDone.length;
    for (let j = firstReply; j < this.block.length && !this.masked[j]; j++) end++;
    return this.finish("stop", Math.min(end, this.params.maxTokens));
  }

  private finishAtStop(limit: number): Finished {
    this.done = true;
    const all = this.reply(limit);
    const { text, count: lo } = cutAtStop(all, this.params.decode, this.params.stops);
    return {
      reason: "stop",
      completionTokens: lo,
      last: this.lastPiece(text, lo),
      text,
      tokens: all.slice(0, lo),
      ...this.grammarReport(),
    };
  }

  private lastPiece(text: string, end: number): BlockText {
    const last: BlockText = { blockIndex: this.blockIndex, text: this.text.finalDelta(text), replyTokens: end };
    if (this.params.logprobs !== undefined) last.logprobs = this.finalLogprobs(end);
    return last;
  }
}
