import cliProgress from "cli-progress";
import type { SnapshotProgress } from "./snapshot.js";

// What a pull shows: on a terminal, cli-progress's bar per phase (bytes, rate, ETA); otherwise
// (a log, CI, a pipe) a plain line per phase and one every 10 s during a download.

export interface PullProgress extends SnapshotProgress {
  /** A new phase (resolve, download, convert, check, ready) with a line about it. */
  phase(name: string, detail: string): void;
  /** The current phase as one line (what /readyz says while a model is being pulled). */
  status(): string;
  done(): void;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

export function createPullProgress(out: NodeJS.WritableStream & { isTTY?: boolean }, label: string, intervalMs = 10_000): PullProgress {
  const tty = out.isTTY === true;
  let phase = "resolve";
  let detail = "";
  let total = 0;
  let done = 0;
  let started = 0;
  let lastLine = 0;
  let bar: cliProgress.SingleBar | undefined;
  const line = (text: string) => {
    if (bar !== undefined) bar.stop();
    bar = undefined;
    out.write(`${label}: ${text}\n`);
  };
  const downloadLine = () => {
    const secs = (Date.now() - started) / 1000;
    const rate = secs > 0 ? done / secs : 0;
    const eta = rate > 0 ? Math.round((total - done) / rate) : undefined;
    return `download ${formatBytes(done)} of ${formatBytes(total)} (${total > 0 ? Math.floor((100 * done) / total) : 100}%), ${formatBytes(rate)}/s${eta !== undefined ? `, ETA ${eta} s` : ""}`;
  };
  return {
    phase(name, text) {
      phase = name;
      detail = text;
      line(`${name}: ${text}`);
    },
    start(bytes, files) {
      total = bytes;
      done = 0;
      started = Date.now();
      lastLine = started;
      phase = "download";
      detail = `${files} file${files === 1 ? "" : "s"}, ${formatBytes(bytes)}`;
      line(`download: ${detail}`);
      if (tty && bytes > 0) {
        bar = new cliProgress.SingleBar(
          {
            format: "  download |{bar}| {percentage}% | {done} of {size} | {speed} | ETA {eta_formatted}",
            stream: out as NodeJS.WritableStream as NodeJS.WriteStream,
            hideCursor: true,
            etaBuffer: 50,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(bytes, 0, { done: formatBytes(0), size: formatBytes(bytes), speed: "" });
      }
    },
    bytes(n) {
      if (started === 0) return; // config.json, fetched before the download phase
      done += n;
      if (bar !== undefined) {
        const secs = (Date.now() - started) / 1000;
        bar.update(done, { done: formatBytes(done), size: formatBytes(total), speed: `${formatBytes(secs > 0 ? done / secs : 0)}/s` });
      } else if (!tty && Date.now() - lastLine >= intervalMs) {
        lastLine = Date.now();
        out.write(`${label}: ${downloadLine()}\n`);
      }
    },
    log(text) {
      if (bar !== undefined) {
        bar.stop();
        bar = undefined;
      }
      out.write(`${label}: ${text}\n`);
    },
    status() {
      return phase === "download" && total > 0 ? `${label}: ${downloadLine()}` : `${label}: ${phase}${detail ? ` (${detail})` : ""}`;
    },
    done() {
      if (bar !== undefined) bar.stop();
      bar = undefined;
    },
  };
}
