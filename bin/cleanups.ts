import type { Logger } from "../lib/logger.js";

/** What a launcher has started, stopped in reverse order at shutdown or after a failed start. */
export interface Cleanups {
  add(name: string, run: () => Promise<void> | void): void;
  /** Runs one step now (e.g. withdrawing a worker before draining); it is not run again. */
  runNow(name: string): Promise<void>;
  /** Runs every step not yet run, the last added first; a failing step is logged and the others still run. */
  runAll(): Promise<void>;
}

export function createCleanups(logger: Logger): Cleanups {
  const steps: { name: string; run: () => Promise<void> | void }[] = [];
  const run = async (step: { name: string; run: () => Promise<void> | void }) => {
    steps.splice(steps.indexOf(step), 1);
    try {
      await step.run();
    } catch (err) {
      logger.error({ err, step: step.name }, "shutdown step failed");
    }
  };
  return {
    add: (name, step) => {
      steps.push({ name, run: step });
    },
    async runNow(name) {
      const step = steps.find((s) => s.name === name);
      if (step !== undefined) await run(step);
    },
    async runAll() {
      while (steps.length > 0) await run(steps[steps.length - 1]!);
    },
  };
}
