import type { FinishedCanvas } from "../decoder/canvas/canvas-decoder.js";
import type { CommittedLogprob } from "../decoder/logprobs.js";
import { cutAtStop, ReplyText, type StopMatcher, tokensSent } from "../decoder/reply-text.js";

/** What one finished canvas (or the end of the reply) adds to the stream. */
export interface CanvasReplyDelta {
  content: string;
  /** With logprobs: the entries of the tokens whose text is now sent, next in reply order. */
  logprobs: CommittedLogprob[];
  /** Reply tokens so far (a stream cut short after this delta is charged for them). */
  completionTokens: number;
}

/**
 * A canvas model's reply as it streams, canvas by canvas: the text of the accepted canvases
 * less any end that could still grow into a stop sequence (reply-text.ts's ReplyText, as for a
 * mask model's blocks), and once a stop sequence appears in the accepted text, the reply ends
 * there: trimmed before it, its tokens the fewest whose text covers what is kept.
 */
export class CanvasReply {
  private readonly tokens: number[] = [];
  private readonly entries: CommittedLogprob[] = [];
  private entriesSent = 0;
  private readonly text: ReplyText;
  private stopped = false;

  constructor(
    private readonly decode: (ids: readonly number[]) => string,
    private readonly stops: StopMatcher,
  ) {
    this.text = new ReplyText(decode, stops);
  }

  /** Whether a stop sequence has ended the reply. */
  get endedByStop(): boolean {
    return this.stopped;
  }

  /** Takes a finished canvas; once a stop sequence is in the reply, nothing more is sent before `finish`. */
  push(canvas: FinishedCanvas): CanvasReplyDelta {
    this.tokens.push(...canvas.tokens);
    this.entries.push(...(canvas.logprobs ?? []));
    if (!this.stops.empty && this.stops.find(this.decode(this.tokens)) !== undefined) this.stopped = true;
    if (this.stopped) return { content: "", logprobs: [], completionTokens: this.tokens.length };
    const content = this.text.blockDelta(this.tokens);
    const sent = tokensSent(this.tokens, this.entriesSent, this.text.sentLength, this.decode);
    const logprobs = this.entries.slice(this.entriesSent, sent);
    this.entriesSent = sent;
    return { content, logprobs, completionTokens: this.tokens.length };
  }

  /** The rest of the final reply: its text (cut before a stop sequence), the entries not sent, and its token count. */
  finish(): CanvasReplyDelta {
    const { text, count } = this.stopped
      ? cutAtStop(this.tokens, this.decode, this.stops)
      : { text: this.decode(this.tokens), count: this.tokens.length };
    const logprobs = this.entries.slice(this.entriesSent, count);
    this.entriesSent = Math.max(this.entriesSent, count);
    return { content: this.text.finalDelta(text), logprobs, completionTokens: count };
  }
}
