// Jinja templates from a model directory (the chat template, decision.json's templates) rendered
// with a budget, so that a template that runs away fails its own render with an error instead of
// hanging the thread or ending the process (docs/security.md, "Templates at serve time").
//
// @huggingface/jinja is a tree-walking interpreter: every node goes through Interpreter.evaluate,
// which this subclass counts (steps, and a wall-clock deadline looked at every 1,024 steps) and
// whose values it measures (characters of a string, items of a list). `range` is bounded before
// it builds its array: the library's builds all of `range(10**10)` in one call, which V8 ends
// with a fatal "invalid size error" that no try/catch sees.
import { Environment, Interpreter, Template } from "@huggingface/jinja";

export interface TemplateBudget {
  /** Nodes evaluated per render. */
  steps: number;
  /** Characters of any one string value, the output included. */
  chars: number;
  /** Items of any one list or mapping (range's included). */
  items: number;
  /** Wall-clock milliseconds per render. */
  ms: number;
}

/**
 * Qwen3's template renders 200 messages in about 40 ms; a prompt is bounded by the context anyway
 * (a 128k-token context is a few million characters). The list bound also bounds what the
 * library's `for` does before its first step (an Environment per item: about 1 s for 65,536 on
 * a loaded 2-core machine), so a runaway stops within about the deadline plus that.
 */
export const TEMPLATE_BUDGET: Readonly<TemplateBudget> = { steps: 5_000_000, chars: 32 * 2 ** 20, items: 65_536, ms: 1_000 };

/** A render ran past its budget: the template's fault, reported for the request that ran it. */
export class TemplateBudgetError extends Error {
  override name = "TemplateBudgetError";
}

export type Parsed = Template["parsed"];
// The package's declarations import "./runtime" without an extension, which this project's module
// resolution does not follow: the interpreter's shape as this file uses it.
type Statement = unknown;
type Value = { type: string; value: unknown };
interface InterpreterShape {
  run(program: Parsed): Value;
  evaluate(statement: Statement, environment: Environment): Value;
}
const InterpreterBase = Interpreter as unknown as new (env: Environment) => InterpreterShape;

class BudgetedInterpreter extends InterpreterBase {
  private steps = 0;
  private readonly deadline: number;

  constructor(
    env: Environment,
    private readonly budget: TemplateBudget,
  ) {
    super(env);
    this.deadline = performance.now() + budget.ms;
    // A loop's body is run through the (private) evaluateBlock, not evaluate: an empty body would
    // cost nothing. The instance's own property shadows the method for the library's calls.
    const self = this as unknown as { evaluateBlock: (statements: Statement[], env: Environment) => Value };
    const block = self.evaluateBlock.bind(this);
    self.evaluateBlock = (statements, scope) => {
      this.step();
      return block(statements, scope);
    };
  }

  private step(): void {
    this.steps++;
    if (this.steps > this.budget.steps) throw new TemplateBudgetError(`the template ran past its budget of ${this.budget.steps} steps`);
    if ((this.steps & 1023) === 0 && performance.now() > this.deadline) {
      throw new TemplateBudgetError(`the template ran past its budget of ${this.budget.ms} ms`);
    }
  }

  override evaluate(statement: Statement, environment: Environment): Value {
    this.step();
    const value = super.evaluate(statement, environment);
    const inner: unknown = value.value;
    if (typeof inner === "string" && inner.length > this.budget.chars) {
      throw new TemplateBudgetError(`the template made a string of ${inner.length} characters (at most ${this.budget.chars})`);
    }
    const size = Array.isArray(inner) ? inner.length : inner instanceof Map ? inner.size : 0;
    if (size > this.budget.items) throw new TemplateBudgetError(`the template made a list of ${size} items (at most ${this.budget.items})`);
    return value;
  }
}

function boundedRange(items: number) {
  return (start: number, stop?: number, step = 1): number[] => {
    const [from, to] = stop === undefined ? [0, start] : [start, stop];
    if (step === 0) throw new Error("range() step must not be zero");
    const count = Math.max(0, Math.ceil((to - from) / step));
    if (!(count <= items)) throw new TemplateBudgetError(`range() of ${count} items (at most ${items})`);
    return Array.from({ length: count }, (_, i) => from + i * step);
  };
}

const pad2 = (n: number) => String(n).padStart(2, "0");

/** The library's strftime_now (%Y %m %d %b %B %H %M %%), which its own globals set up. */
function strftimeNow(format: string): string {
  const now = new Date();
  const month = (style: "long" | "short") => new Intl.DateTimeFormat(undefined, { month: style }).format(now);
  return format.replace(/%[YmdbBHM%]/g, (token) => {
    switch (token) {
      case "%Y":
        return String(now.getFullYear());
      case "%m":
        return pad2(now.getMonth() + 1);
      case "%d":
        return pad2(now.getDate());
      case "%b":
        return month("short");
      case "%B":
        return month("long");
      case "%H":
        return pad2(now.getHours());
      case "%M":
        return pad2(now.getMinutes());
      default:
        return "%";
    }
  });
}

/** Renders a parsed template within `budget`: the globals Template.render sets up, range bounded. */
export function renderBounded(parsed: Parsed, items: Record<string, unknown>, budget: TemplateBudget = TEMPLATE_BUDGET): string {
  const env = new Environment();
  const globals: Record<string, unknown> = {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range: boundedRange(budget.items),
    strftime_now: strftimeNow,
  };
  for (const [key, value] of Object.entries({ ...globals, ...items })) env.set(key, value);
  const result = new BudgetedInterpreter(env, budget).run(parsed);
  return result.value as string;
}

/** Template with a bounded render: the same parse (trim_blocks, lstrip_blocks) and globals as @huggingface/jinja's. */
export class BoundedTemplate {
  readonly parsed: Parsed;

  constructor(
    source: string | { parsed: Parsed },
    private readonly budget: TemplateBudget = TEMPLATE_BUDGET,
  ) {
    this.parsed = typeof source === "string" ? new Template(source).parsed : source.parsed;
  }

  render(items: Record<string, unknown> = {}): string {
    return renderBounded(this.parsed, items, this.budget);
  }
}
