// What a pull shows: cli-progress's bar on a terminal, plain lines elsewhere, and the one-line
// status /readyz gives while serve --model pulls.
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { createPullProgress } from "../../lib/hub/progress.js";

function sink(tty: boolean) {
  const stream = Object.assign(new PassThrough(), {
    isTTY: tty,
    columns: 120,
    cursorTo: () => true,
    clearLine: () => true,
    moveCursor: () => true,
  });
  let text = "";
  stream.on("data", (d: Buffer) => (text += d.toString()));
  return { stream, text: () => text };
}

describe("pull progress", () => {
  it("not on a terminal: a line per phase and a download line every interval, no bar", async () => {
    const out = sink(false);
    const p = createPullProgress(out.stream, "org/m", 0);
    p.phase("resolve", "org/m@main on https://huggingface.co");
    p.start(2 * 1024 * 1024, 2);
    p.bytes(1024 * 1024);
    expect(p.status()).toMatch(/^org\/m: download 1\.00 MiB of 2\.00 MiB \(50%\), [\d.]+ (B|KiB|MiB|GiB)\/s/);
    p.bytes(1024 * 1024);
    p.phase("convert", "SDAR -> int8");
    expect(p.status()).toBe("org/m: convert (SDAR -> int8)");
    p.done();
    const lines = out.text().split("\n");
    expect(lines[0]).toBe("org/m: resolve: org/m@main on https://huggingface.co");
    expect(lines[1]).toBe("org/m: download: 2 files, 2.00 MiB");
    expect(lines[2]).toMatch(/^org\/m: download 1\.00 MiB of 2\.00 MiB \(50%\)/);
    expect(lines[3]).toMatch(/^org\/m: download 2\.00 MiB of 2\.00 MiB \(100%\)/);
    expect(lines[4]).toBe("org/m: convert: SDAR -> int8");
    expect(out.text()).not.toMatch(/\u2591|\u2588|\|/); // no bar characters
  });

  it("on a terminal: cli-progress's bar with bytes, percentage and ETA", async () => {
    const out = sink(true);
    const p = createPullProgress(out.stream, "org/m");
    p.start(4 * 1024 * 1024, 3);
    p.bytes(1024 * 1024);
    p.phase("convert", "done downloading");
    p.done();
    expect(out.text()).toMatch(/download \|[\u2588\u2591]+\| 25% \| 1\.00 MiB of 4\.00 MiB \| [\d.]+ \S+\/s \| ETA/);
    expect(out.text()).toContain("org/m: convert: done downloading\n");
  });
});
