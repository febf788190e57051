// A vitest reporter that names a test file that runs far past its expected time. A file whose
// event loop is blocked (a native call that never returns) is out of reach of vitest's test
// timeouts and would hold the whole run; this names it on stderr and, past the hard limit,
// ends the run so that CI fails in minutes with the culprit in its last lines.
import type { Reporter, TestModule } from "vitest/node";

const WARN_AFTER_MS = Number(process.env.TESSERA_TEST_FILE_WARN_MS ?? 5 * 60_000);
const ABORT_AFTER_MS = Number(process.env.TESSERA_TEST_FILE_ABORT_MS ?? 15 * 60_000);

export default class HangWatchdogReporter implements Reporter {
  private readonly running = new Map<string, { started: number; warned: number }>();
  private timer: NodeJS.Timeout | undefined;

  onTestModuleStart(testModule: TestModule): void {
    this.running.set(testModule.moduleId, { started: Date.now(), warned: 0 });
    this.timer ??= setInterval(() => this.check(), 15_000).unref();
  }

  onTestModuleEnd(testModule: TestModule): void {
    this.running.delete(testModule.moduleId);
  }

  onTestRunEnd(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private check(): void {
    const now = Date.now();
    for (const [file, state] of this.running) {
      const ms = now - state.started;
      if (ms >= ABORT_AFTER_MS) {
        process.stderr.write(`\nhang watchdog: ${file} has run ${Math.round(ms / 1000)} s; ending the test run\n`);
        process.exit(1);
      }
      if (ms >= WARN_AFTER_MS && now - state.warned >= 60_000) {
        state.warned = now;
        process.stderr.write(`\nhang watchdog: ${file} still running after ${Math.round(ms / 1000)} s\n`);
      }
    }
  }
}
