import { clear, el } from "../dom.js";
import type { DenoisingStep } from "./chat-stream.js";

interface BlockStats {
  block: number;
  forwards: number;
  committed: number;
}

/** A token as a cell shows it: whitespace made visible, never empty. */
export function visibleToken(text: string): string {
  if (text === "") return "∅";
  return text.replaceAll("\n", "⏎").replaceAll("\t", "⇥").replace(/^ /, "␣").replace(/ $/, "␣");
}

/**
 * The live denoising view: the current block as a strip of cells (prompt tail, masked
 * placeholders, committed tokens shaded by the step that committed them), the current
 * block's forwards and tokens per forward, and a line per finished block. A canvas model's
 * steps (`canvas` set) show the whole canvas instead: each position's draft token, accepted
 * or still noise (renoised), until its last step, whose draft the reply takes.
 */
export class DenoiseView {
  private readonly strip: HTMLElement;
  private readonly status: HTMLElement;
  private readonly history: HTMLTableSectionElement;
  private readonly legendLast: HTMLElement;
  private readonly legend: HTMLElement;
  private readonly canvasLegend: HTMLElement;
  private cells: HTMLElement[] = [];
  private current: BlockStats | null = null;

  constructor(root: HTMLElement) {
    this.status = el("p", { class: "denoise-status", text: "Send a message to watch its blocks denoise." });
    this.strip = el("div", { class: "denoise-strip", testid: "denoise-view", attrs: { role: "img", "aria-label": "current block" } });
    this.history = el("tbody");
    this.legendLast = el("span", { text: "last" });
    this.legend = el(
      "div",
      { class: "denoise-legend", attrs: { "aria-hidden": "true" } },
      "committed at forward 1 ",
      el("span", { class: "legend-ramp" }),
      " ",
      this.legendLast,
    );
    // A canvas model's states: every position holds a draft token each step.
    const swatch = (state: string, text: string) => el("span", { class: "cell legend-cell", text, attrs: { "data-state": state } });
    this.canvasLegend = el(
      "div",
      { class: "denoise-legend", attrs: { "aria-hidden": "true" } },
      swatch("noise", "noise"),
      " renoised ",
      swatch("accepted", "draft"),
      " accepted this step ",
      swatch("committed", "final"),
      " the canvas the reply takes",
    );
    this.canvasLegend.hidden = true;
    const table = el(
      "table",
      { class: "denoise-history" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          el("th", { text: "block" }),
          el("th", { text: "forwards" }),
          el("th", { text: "tokens" }),
          el("th", { text: "tokens / forward" }),
        ),
      ),
      this.history,
    );
    root.append(this.status, this.strip, this.legend, this.canvasLegend, table);
  }

  reset(): void {
    clear(this.strip);
    clear(this.history);
    this.cells = [];
    this.current = null;
    this.strip.dataset["block"] = "";
    this.status.textContent = "Waiting for the first forward…";
  }

  step(step: DenoisingStep): void {
    if (step.canvas !== undefined) {
      this.canvasStep(step, step.canvas);
      return;
    }
    if (this.current === null || this.current.block !== step.block) this.openBlock(step);
    const stats = this.current!;
    stats.forwards = step.step;
    for (const { position, token_id, text, forced } of step.committed) {
      const cell = this.cells[position];
      if (cell === undefined) continue;
      cell.dataset["state"] = "committed";
      cell.dataset["step"] = String(Math.max(1, step.step));
      if (forced) cell.dataset["forced"] = "true";
      cell.textContent = visibleToken(text);
      cell.title = `${JSON.stringify(text)} · token ${token_id} · ${forced ? "forced by the grammar before forward" : "forward"} ${step.step}`;
      stats.committed++;
    }
    this.shade(step.step);
    this.status.textContent = `Block ${step.block} · forward ${step.step} · ${stats.committed} committed, ${step.masked} masked · ${rate(stats)} tokens per forward`;
  }

  /** A canvas step: every cell shows its draft token, accepted or noise; on the last step, the canvas the reply takes. */
  private canvasStep(step: DenoisingStep, canvas: NonNullable<DenoisingStep["canvas"]>): void {
    if (this.current === null || this.current.block !== step.block) this.openBlock(step);
    const stats = this.current!;
    stats.forwards = step.step;
    canvas.forEach(({ token_id, text, accepted }, position) => {
      const cell = this.cells[position];
      if (cell === undefined) return;
      const state = step.canvas_final === true ? "committed" : accepted ? "accepted" : "noise";
      cell.dataset["state"] = state;
      // The final draft is taken whole: every cell at the dark end of the ramp.
      if (state === "committed") {
        cell.style.setProperty("--t", "0");
        cell.dataset["shade"] = "dark";
      }
      cell.textContent = visibleToken(text);
      cell.title = `${JSON.stringify(text)} · token ${token_id} · step ${step.step}: ${
        state === "committed" ? "the canvas's final draft, taken by the reply" : accepted ? "accepted" : "renoised (still noise)"
      }`;
    });
    const accepted = canvas.filter((c) => c.accepted).length;
    if (step.canvas_final === true) {
      stats.committed = canvas.length;
      this.status.textContent = `Canvas ${step.block} · final at step ${step.step} · ${canvas.length} tokens · ${rate(stats)} tokens per step`;
      return;
    }
    this.status.textContent = `Canvas ${step.block} · step ${step.step} · ${accepted} accepted, ${step.masked} still noise`;
  }

  /** The reply ended: positions still masked are not part of it. */
  finish(summary: string): void {
    for (const cell of this.cells) {
      if (cell.dataset["state"] === "masked") {
        cell.dataset["state"] = "unused";
        cell.textContent = "";
      }
    }
    if (this.current !== null) this.addHistory(this.current);
    this.current = null;
    this.status.textContent = summary;
  }

  /** Shades every committed cell by its forward, from the block's first (dark) to its latest (light). */
  private shade(latest: number): void {
    this.legendLast.textContent = `→ ${latest}`;
    for (const cell of this.cells) {
      const step = Number(cell.dataset["step"] ?? 0);
      if (step === 0) continue;
      const t = latest <= 1 ? 0 : (step - 1) / (latest - 1);
      cell.style.setProperty("--t", t.toFixed(3));
      cell.dataset["shade"] = t < 0.55 ? "dark" : "light";
    }
  }

  private openBlock(step: DenoisingStep): void {
    if (this.current !== null) this.addHistory(this.current);
    this.current = { block: step.block, forwards: 0, committed: 0 };
    clear(this.strip);
    this.strip.dataset["block"] = String(step.block);
    this.cells = [];
    const noise = step.canvas !== undefined;
    this.legend.hidden = noise;
    this.canvasLegend.hidden = !noise;
    for (let position = 0; position < step.block_size; position++) {
      const prompt = position < step.reply_start;
      const cell = el("span", { class: "cell", text: prompt ? "" : "·", title: prompt ? "prompt" : `position ${position}: masked` });
      cell.dataset["state"] = prompt ? "prompt" : noise ? "noise" : "masked";
      this.cells.push(cell);
      this.strip.append(cell);
    }
  }

  private addHistory(stats: BlockStats): void {
    this.history.append(
      el(
        "tr",
        {},
        el("td", { text: String(stats.block) }),
        el("td", { text: String(stats.forwards) }),
        el("td", { text: String(stats.committed) }),
        el("td", { text: rate(stats) }),
      ),
    );
  }
}

function rate(stats: BlockStats): string {
  return stats.forwards === 0 ? "–" : (stats.committed / stats.forwards).toFixed(1);
}
