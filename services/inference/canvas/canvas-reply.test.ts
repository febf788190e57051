import { describe, expect, it } from "vitest";
import type { CommittedLogprob } from "../decoder/logprobs.js";
import { StopMatcher } from "../decoder/reply-text.js";
import { CanvasReply } from "./canvas-reply.js";

// Token i spells WORDS[i]; "é" is split over two byte tokens (4, 5) as byte-level tokenizers do.
const WORDS = ["Hello", " wor", "ld", " END", "\u00c3", "\u00a9", "!", " E", "ND"];
const decode = (ids: readonly number[]) => {
  const text = ids.map((id) => WORDS[id]).join("");
  // The two halves of "é" read as one character, a lone first half as U+FFFD.
  return text.replace("\u00c3\u00a9", "é").replace("\u00c3", "\uFFFD");
};
const entry = (token: number, step: number): CommittedLogprob => ({ token, logprob: -0.5, top: [], step });
const canvas = (tokens: number[], canvasIndex: number, step: number) => ({
  tokens,
  canvasIndex,
  logprobs: tokens.map((t) => entry(t, step)),
});

describe("CanvasReply: a canvas model's reply, canvas by canvas", () => {
  it("without stops: each canvas's text, a split character held back until the next canvas completes it", () => {
    const reply = new CanvasReply(decode, new StopMatcher([]));
    const a = reply.push(canvas([0, 4], 0, 3));
    expect(a.content).toBe("Hello");
    // A token whose text is an incomplete character adds no text: its entry goes with what is sent.
    expect(a.logprobs.map((e) => e.token)).toEqual([0, 4]);
    const b = reply.push(canvas([5, 6], 1, 7));
    expect(b.content).toBe("é!");
    expect(b.logprobs.map((e) => e.token)).toEqual([5, 6]);
    expect(b.logprobs.map((e) => e.step)).toEqual([7, 7]);
    expect(reply.endedByStop).toBe(false);
    const end = reply.finish();
    expect(end).toEqual({ content: "", logprobs: [], completionTokens: 4 });
  });

  it("a stop sequence spanning two canvases ends the reply; the text is cut before it, the tokens the fewest that cover it", () => {
    const reply = new CanvasReply(decode, new StopMatcher([" END"]));
    const a = reply.push(canvas([0, 1, 2, 7], 0, 4));
    // " E" could still grow into " END": held back, and its entry with it.
    expect(a.content).toBe("Hello world");
    expect(a.logprobs.map((e) => e.token)).toEqual([0, 1, 2]);
    expect(reply.endedByStop).toBe(false);
    const b = reply.push(canvas([8, 6, 0], 1, 9));
    expect(reply.endedByStop).toBe(true);
    expect(b.content).toBe("");
    const end = reply.finish();
    expect(end.content).toBe("");
    expect(end.completionTokens).toBe(3);
    expect(end.logprobs).toEqual([]);
  });

  it("a held-back end that does not become a stop sequence is sent with the next canvas", () => {
    const reply = new CanvasReply(decode, new StopMatcher([" END"]));
    expect(reply.push(canvas([0, 7], 0, 2)).content).toBe("Hello");
    const b = reply.push(canvas([6], 1, 5));
    expect(b.content).toBe(" E!");
    expect(b.logprobs.map((e) => e.token)).toEqual([7, 6]);
    expect(reply.finish()).toEqual({ content: "", logprobs: [], completionTokens: 3 });
  });

  it("a stop sequence inside one canvas: the text before it is sent at the end, with the entries of the tokens kept", () => {
    const reply = new CanvasReply(decode, new StopMatcher(["ld E", "zzz"]));
    expect(reply.push(canvas([0, 1, 2, 7, 8], 0, 6))).toEqual({ content: "", logprobs: [], completionTokens: 5 });
    const end = reply.finish();
    expect(end.content).toBe("Hello wor");
    expect(end.completionTokens).toBe(2);
    expect(end.logprobs.map((e) => e.token)).toEqual([0, 1]);
  });
});
