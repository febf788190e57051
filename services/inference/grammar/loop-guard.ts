/**
 * Steering a constrained reply out of a value it would never leave (docs/constrained-decoding.md,
 * "Finishing a value"). Deterministic, from the committed tokens alone:
 *
 * - **Loop guard.** Inside a string, an array or an object, when the last tokens repeat a unit
 *   of 1–8 tokens at least `loopRepeats` times and over at least 8 tokens, the token that would
 *   repeat the unit once more is masked at the frontier, so another of the grammar's choices
 *   wins; each such intervention adds closing pressure to the value (below). Numbers are left
 *   to their bounds (number-bounds.ts: at most 16 digits). Text outside JSON (an auto-tools
 *   reply before `<tool_call>`) only with `freeText`.
 * - **Soft length budget.** Past `stringBudget` tokens in a string, or `itemBudget` items in an
 *   array or object, the tokens that close the value (`"`, `]`, `}`) get a logit bonus that grows
 *   with every token or item beyond the budget, so a rambling value ends instead of eating the
 *   reply. The grammar still decides what is allowed: a closing token is favoured only where the
 *   schema lets the value end.
 * - **Reply budget.** With the reply's `max_tokens` known, as the reply nears it every open
 *   value is pushed to close: from the ramp's start (a quarter of `max_tokens` before the
 *   reserve) the innermost value's closing tokens get a bonus growing to `RAMP_MAX` logits, and
 *   within the reserve (room to close every open value and write the members still required,
 *   estimated from the nesting depth) the tokens that only close (`"`, `"}`, `]}` …, nothing
 *   opened after them) win wherever the grammar allows them. So a constrained reply completes
 *   before `max_tokens` whenever the grammar lets its values end.
 */
import type { ChatSpecialTokens } from "../core/model-config.js";
import type { GuessBias } from "./frontier-rule.js";
import type { GrammarSpec } from "./grammar-spec.js";
import { type Frame, JsonTracker } from "./json-tracker.js";
import { ONLY_CLOSES } from "./frontier-rule.js";

export interface FinishRules {
  /** Repeats of a unit that trigger the loop guard; 0: off. */
  loopRepeats: number;
  /** Tokens of a string before closing is favoured; 0: no budget. */
  stringBudget: number;
  /** Items of an array or object before closing is favoured; 0: no budget. */
  itemBudget: number;
  /** Also guard text outside JSON (auto tools' free text). */
  freeText: boolean;
  /** Close every open value before the reply's max_tokens (replyPressure); false: off. */
  replyBudget?: boolean;
}

export const DEFAULT_FINISH_RULES: FinishRules = { loopRepeats: 4, stringBudget: 256, itemBudget: 64, freeText: false, replyBudget: true };

/** The shortest repeating tail the loop guard acts on, in tokens. */
const MIN_LOOP_TOKENS = 8;
const MAX_UNIT = 8;
/** Closing bonus, in logits: per string token past the budget, per item past it, per intervention. */
const PER_TOKEN = 0.5;
const PER_ITEM = 2;
const PER_INTERVENTION = 4;
/** Reply budget: the reserve is RESERVE_BASE + RESERVE_PER_LEVEL per open value (at most a quarter of max_tokens). */
const RESERVE_BASE = 32;
const RESERVE_PER_LEVEL = 6;
/** The ramp's bonus at the reserve, in logits, and the bonus a closing-only token gets inside it. */
const RAMP_MAX = 12;
const DECISIVE = 1e4;

/**
 * The reply budget's pressure with `used` of `maxTokens` committed at nesting `depth`: the ramp's
 * bonus for the innermost value's closing tokens (0 before the ramp), and `decisive` once the
 * tokens left are within the reserve.
 */
export function replyPressure(maxTokens: number, used: number, depth: number): { bonus: number; decisive: boolean } {
  const reserve = Math.min(RESERVE_BASE + RESERVE_PER_LEVEL * depth, Math.floor(maxTokens / 4));
  const ramp = Math.max(1, Math.floor(maxTokens / 4));
  const left = maxTokens - used;
  if (left <= reserve) return { bonus: RAMP_MAX, decisive: true };
  if (left >= reserve + ramp) return { bonus: 0, decisive: false };
  return { bonus: (RAMP_MAX * (reserve + ramp - left)) / ramp, decisive: false };
}

/** What a guess under the guard should avoid and favour. */
export interface Steering extends GuessBias {
  /** The frame the steering is for (interventions are counted on it). */
  frame: Frame | undefined;
}

/** The counts the reply's report and the metrics carry. */
export interface GuardCounts {
  /** Guesses the loop guard changed (the repeating continuation was the best token). */
  loops: number;
  /** Guesses the length budget changed (a closing token won only with its bonus). */
  budget: number;
}

/**
 * The token that would repeat the tail's unit once more, when `tokens[from..]` ends with a unit
 * of n ≤ 8 tokens repeated at least `repeats` times and over at least 8 tokens; else undefined.
 */
export function repeatingContinuation(tokens: readonly number[], from: number, repeats: number): number | undefined {
  const len = tokens.length;
  for (let n = 1; n <= MAX_UNIT; n++) {
    const span = Math.max(repeats * n, MIN_LOOP_TOKENS);
    if (len - from < span) continue;
    let periodic = true;
    for (let i = len - span + n; i < len && periodic; i++) periodic = tokens[i] === tokens[i - n];
    if (periodic) return tokens[len - n];
  }
  return undefined;
}

/**
 * Each token's closing role: 1 starts with `"`, 2 with `]`, 3 with `}`; 0 none; plus ONLY_CLOSES
 * when every byte of it closes something or is white space (`"}`, `]}`, `"]`, not `", "`).
 */
function closingRoles(tokenBytes: readonly Uint8Array[]): Uint8Array {
  const roles = new Uint8Array(tokenBytes.length);
  const closesOnly = (bytes: Uint8Array) => bytes.every((b) => b === 0x22 || b === 0x5d || b === 0x7d || b === 0x20 || b === 0x0a);
  tokenBytes.forEach((bytes, id) => {
    const first = bytes[0];
    const role = first === 0x22 ? 1 : first === 0x5d ? 2 : first === 0x7d ? 3 : 0;
    roles[id] = role === 0 ? 0 : role | (closesOnly(bytes) ? ONLY_CLOSES : 0);
  });
  return roles;
}

const ROLE = { string: 1, array: 2, object: 3 } as const;
const rolesCache = new WeakMap<readonly Uint8Array[], Uint8Array>();

/** The guard of one reply: follows its committed tokens and steers its guesses. */
export class ValueGuard {
  readonly tracker: JsonTracker;
  readonly counts: GuardCounts = { loops: 0, budget: 0 };
  private readonly roles: Uint8Array;

  constructor(
    private readonly rules: FinishRules,
    /** `call`: a Gemma 4 call's `call:NAME` head, then its arguments object. */
    start: "json" | "free" | "call",
    tokenBytes: readonly Uint8Array[],
    openTag: string,
    /** The reply's max_tokens (the reply budget); undefined: no reply budget. */
    private readonly maxTokens?: number,
  ) {
    this.tracker =
      start === "call" ? new JsonTracker("json", tokenBytes, openTag, "after", true) : new JsonTracker(start, tokenBytes, openTag);
    let roles = rolesCache.get(tokenBytes);
    if (roles === undefined) {
      roles = closingRoles(tokenBytes);
      rolesCache.set(tokenBytes, roles);
    }
    this.roles = roles;
  }

  /** Whether any rule is on (an all-off guard is not installed at all). */
  static active(rules: FinishRules): boolean {
    return rules.loopRepeats > 0 || rules.stringBudget > 0 || rules.itemBudget > 0;
  }

  committed(token: number): void {
    this.tracker.push(token);
  }

  /** The steering of the next guess, or undefined when nothing is steered. */
  steering(): Steering | undefined {
    const { tracker, rules } = this;
    if (tracker.mode === "after") return undefined;
    // A number is left to its bounds; it may be complete, so its container's budget still applies.
    const inNumber = tracker.innermost?.kind === "number";
    const frame = inNumber ? tracker.frames.at(-2) : tracker.innermost;
    if (tracker.mode === "free" || (frame === undefined && !inNumber)) {
      if (!(tracker.mode === "free" && rules.freeText && rules.loopRepeats > 0)) return undefined;
      const ban = repeatingContinuation(tracker.tokens, 0, rules.loopRepeats);
      return ban === undefined ? undefined : { ban, bonus: 0, frame: undefined };
    }
    if (frame === undefined) return undefined;
    const ban = rules.loopRepeats > 0 && !inNumber ? repeatingContinuation(tracker.tokens, frame.start, rules.loopRepeats) : undefined;
    let bonus = PER_INTERVENTION * frame.interventions;
    if (frame.kind === "string" && rules.stringBudget > 0) {
      bonus += PER_TOKEN * Math.max(0, tracker.tokens.length - frame.start - rules.stringBudget);
    } else if (frame.kind !== "string" && rules.itemBudget > 0) {
      bonus += PER_ITEM * Math.max(0, frame.commas + 1 - rules.itemBudget);
    }
    let closeOnly = 0;
    if (this.maxTokens !== undefined && rules.replyBudget !== false) {
      const pressure = replyPressure(this.maxTokens, tracker.tokens.length, tracker.frames.length);
      bonus += pressure.bonus;
      if (pressure.decisive) closeOnly = DECISIVE;
    }
    if (ban === undefined && bonus === 0) return undefined;
    return {
      ...(ban !== undefined ? { ban } : {}),
      bonus,
      ...(bonus > 0 ? { favour: this.roles, role: ROLE[frame.kind as keyof typeof ROLE] } : {}),
      ...(closeOnly > 0 ? { closeOnly } : {}),
      frame,
    };
  }

  /** A guess was changed by the steering: `loop` by the mask on the repeat, else by the budget. */
  intervened(steering: Steering, loop: boolean): void {
    if (loop) {
      this.counts.loops++;
      if (steering.frame !== undefined) steering.frame.interventions++;
    } else this.counts.budget++;
  }
}

/**
 * The guard of a reply under `spec`, or undefined when its rules are all off. An auto-tools
 * reply starts in free text (a value follows each `<tool_call>`); every other starts in its value.
 */
export function replyGuard(
  spec: GrammarSpec,
  rules: { finish?: FinishRules | undefined; maxTokens?: number | undefined },
  grammars: { tokenBytes: readonly Uint8Array[]; tags: ChatSpecialTokens },
): ValueGuard | undefined {
  if (rules.finish === undefined || !ValueGuard.active(rules.finish)) return undefined;
  return new ValueGuard(
    rules.finish,
    spec.kind === "tool_calls" ? "free" : spec.kind === "gemma4_call" ? "call" : "json",
    grammars.tokenBytes,
    grammars.tags.toolCall[0],
    rules.maxTokens,
  );
}
