import { type Composition, composePolicy } from "./compose.js";
import { creditRule } from "./credit.js";
import type { UnmaskPolicy } from "./policy.js";
import { sequentialRule } from "./sequential.js";
import { thresholdRule } from "./threshold.js";

/**
 * The unmasking-policy registry. A policy is named by a spec: components joined by `+`, each
 * `name` or `name(knobs)`, knobs comma-separated, the first one positional (the component's
 * main knob) or any as `key=value`:
 *
 *   threshold(0.9)      sequential      fill(0.5)+credit(bound=2)+threshold(0.9)
 *   subblocks(16)+threshold(0.8)         fill(confidence=0.6)+sequential
 *
 * Rules (threshold, sequential, credit) each choose positions; a step commits the union of
 * their choices, and the most confident guess when that is empty. `subblocks` narrows what
 * the rules see to the open sub-blocks; `fill` adds the end-of-turn fill. A spec without a
 * rule gets `threshold`. The order of the components does not matter.
 */
export const DEFAULT_POLICY = "threshold";
export const DEFAULT_THRESHOLD = 0.9;

interface Knob {
  min: number;
  max: number;
  integer?: boolean;
  /** Default; a function of the build defaults where the server setting gives it. */
  fallback: number | ((defaults: PolicyDefaults) => number);
}

interface ComponentDef {
  /** A rule chooses positions; the others shape the composition (compose.ts). */
  kind: "rule" | "subblocks" | "fill";
  /** Knobs in positional order (the first is the main knob). */
  knobs: Record<string, Knob>;
  build?(knobs: Record<string, number>): UnmaskPolicy;
  help: string;
  /** Place in a label (canonicalSpec): components are spelled out in rising order of it. */
  labelOrder: number;
}

const COMPONENTS: Record<string, ComponentDef> = {
  threshold: {
    kind: "rule",
    knobs: { confidence: { min: 0, max: 1.01, fallback: (d) => d.threshold } },
    build: (k) => thresholdRule(k.confidence!),
    help: "threshold(confidence): every guess at or above the confidence commits",
    labelOrder: 3,
  },
  sequential: {
    kind: "rule",
    knobs: {},
    build: () => sequentialRule(),
    help: "sequential: one position per step, the most confident (the quality reference)",
    labelOrder: 4,
  },
  credit: {
    kind: "rule",
    knobs: { bound: { min: 0.01, max: 64, fallback: 2 }, steps: { min: 0, max: 64, integer: true, fallback: 0 } },
    build: (k) => creditRule(k.bound!, k.steps!),
    help: "credit(bound, steps): a guess whose confidence summed over the steps it stayed the best reaches bound commits; so does one unchanged for `steps` steps (0: off)",
    labelOrder: 2,
  },
  fill: {
    kind: "fill",
    knobs: { confidence: { min: 0, max: 1.01, fallback: 0.5 } },
    help: "fill(confidence): the block's suffix guessed end-of-turn at this confidence commits at once, and everything after a committed end of turn",
    labelOrder: 0,
  },
  subblocks: {
    kind: "subblocks",
    knobs: {
      size: { min: 1, max: 4096, integer: true, fallback: (d) => d.subBlockSize ?? 16 },
      confident: { min: 0, max: 1.01, fallback: 0.9 },
    },
    help: "subblocks(size, confident): rules see one sub-block at a time, left to right; the next opens early when its guesses are all confident",
    labelOrder: 1,
  },
};

export interface PolicyDefaults {
  /** Confidence of `threshold` where the spec gives none (TESSERA_UNMASK_THRESHOLD). */
  threshold: number;
  /** Size of `subblocks` where the spec gives none (config.json `decoding.sub_block_size`; default 16). */
  subBlockSize?: number;
}

export interface ParsedComponent {
  name: string;
  knobs: Record<string, number>;
}

/** Parses and checks a spec; throws an Error naming what is wrong. */
export function parsePolicySpec(spec: string, defaults: PolicyDefaults = { threshold: DEFAULT_THRESHOLD }): ParsedComponent[] {
  const text = spec.replace(/\s+/g, "");
  if (text === "") throw new Error("unmasking policy: empty spec");
  const parts = splitTop(text);
  const seen = new Set<string>();
  return parts.map((part) => {
    const m = /^([a-z-]+)(?:\((.*)\))?$/.exec(part);
    if (m === null) throw new Error(`unmasking policy: cannot read "${part}" (expected name or name(knobs))`);
    const name = m[1]!;
    const def = COMPONENTS[name];
    if (def === undefined) throw new Error(`unmasking policy: unknown "${name}" (known: ${Object.keys(COMPONENTS).join(", ")})`);
    if (seen.has(name)) throw new Error(`unmasking policy: "${name}" given twice`);
    seen.add(name);
    const names = Object.keys(def.knobs);
    const given: Record<string, number> = {};
    const args = m[2] === undefined || m[2] === "" ? [] : m[2].split(",");
    args.forEach((arg, i) => {
      const eq = arg.indexOf("=");
      const key = eq >= 0 ? arg.slice(0, eq) : names[i];
      const raw = eq >= 0 ? arg.slice(eq + 1) : arg;
      if (key === undefined || def.knobs[key] === undefined) {
        throw new Error(
          `unmasking policy: ${name} has no knob ${eq >= 0 ? `"${key}"` : `at position ${i + 1}`} (knobs: ${names.join(", ") || "none"})`,
        );
      }
      if (key in given) throw new Error(`unmasking policy: ${name}.${key} given twice`);
      given[key] = knobValue(name, key, raw, def.knobs[key]!);
    });
    const knobs: Record<string, number> = {};
    for (const [key, knob] of Object.entries(def.knobs)) {
      knobs[key] = given[key] ?? (typeof knob.fallback === "function" ? knob.fallback(defaults) : knob.fallback);
    }
    return { name, knobs };
  });
}

/** Builds the policy a spec names (see parsePolicySpec). */
export function buildPolicy(spec: string, defaults?: PolicyDefaults): UnmaskPolicy {
  const components = parsePolicySpec(spec, defaults);
  const rules: UnmaskPolicy[] = [];
  const parts: Composition = { rules };
  for (const c of components) {
    const def = COMPONENTS[c.name]!;
    if (def.kind === "rule") rules.push(def.build!(c.knobs));
    else if (def.kind === "fill") parts.fill = { confidence: c.knobs.confidence! };
    else parts.subBlocks = { size: c.knobs.size!, confident: c.knobs.confident! };
  }
  if (rules.length === 0) {
    const threshold = parsePolicySpec("threshold", defaults)[0]!;
    rules.push(thresholdRule(threshold.knobs.confidence!));
    components.push(threshold);
  }
  return composePolicy(canonicalSpec(components), parts);
}

/** The spec with every knob spelled out, in a fixed order: a stable label. */
export function canonicalSpec(components: readonly ParsedComponent[]): string {
  return [...components]
    .sort((a, b) => COMPONENTS[a.name]!.labelOrder - COMPONENTS[b.name]!.labelOrder)
    .map((c) => {
      const knobs = Object.entries(c.knobs).map(([k, v]) => `${k}=${v}`);
      return knobs.length === 0 ? c.name : `${c.name}(${knobs.join(",")})`;
    })
    .join("+");
}

/** One line per component, for --help and errors. */
export function policyHelp(): string[] {
  return Object.values(COMPONENTS).map((c) => c.help);
}

function knobValue(component: string, key: string, raw: string, knob: Knob): number {
  const value = Number(raw);
  if (
    raw === "" ||
    !Number.isFinite(value) ||
    value < knob.min ||
    value > knob.max ||
    (knob.integer === true && !Number.isInteger(value))
  ) {
    throw new Error(
      `unmasking policy: ${component}.${key} must be ${knob.integer === true ? "an integer" : "a number"} in [${knob.min}, ${knob.max}], got "${raw}"`,
    );
  }
  return value;
}

/** Splits at `+` outside parentheses. */
function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === "(") depth++;
    else if (ch === ")") depth--;
    else if (ch === "+" && depth === 0) {
      parts.push(text.slice(from, i));
      from = i + 1;
    }
  }
  parts.push(text.slice(from));
  if (parts.some((p) => p === "")) throw new Error(`unmasking policy: empty component in "${text}"`);
  return parts;
}
