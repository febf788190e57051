import type { Api } from "./api.js";
import { clear, el } from "./dom.js";
import { hideError, showError } from "./error-view.js";

export interface ModelEntry {
  name: string;
  description: string;
  release_date: string;
}

/**
 * The listing of GET /v1/models, loaded when the key changes, shared by the tabs. A load that
 * is scheduled or running is `pending`: a send pressed right after the key was pasted waits for
 * it (`settled`) instead of finding no model.
 */
export class ModelList {
  models: ModelEntry[] = [];
  private readonly listeners: ((models: ModelEntry[], error: unknown) => void)[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private current: Promise<void> | undefined;
  private finishScheduled: (() => void) | undefined;

  constructor(private readonly api: Api) {}

  onChange(listener: (models: ModelEntry[], error: unknown) => void): void {
    this.listeners.push(listener);
  }

  get pending(): boolean {
    return this.current !== undefined;
  }

  /** Resolves once no load is scheduled or running. */
  async settled(): Promise<void> {
    while (this.current !== undefined) await this.current;
  }

  /** Loads after `delayMs` without another call (typing a key must not spend its per-minute requests). */
  loadSoon(delayMs: number): void {
    clearTimeout(this.timer);
    if (this.finishScheduled === undefined) {
      const scheduled = new Promise<void>((resolve) => {
        this.finishScheduled = resolve;
      });
      this.track(scheduled);
    }
    this.timer = setTimeout(() => {
      const finish = this.finishScheduled;
      this.finishScheduled = undefined;
      void this.load().then(finish);
    }, delayMs);
  }

  /** Cancels a scheduled load (the key was cleared). */
  cancelSoon(): void {
    clearTimeout(this.timer);
    const finish = this.finishScheduled;
    this.finishScheduled = undefined;
    finish?.();
  }

  load(): Promise<void> {
    return this.track(this.fetchList());
  }

  private track(work: Promise<void>): Promise<void> {
    const tracked = work.finally(() => {
      if (this.current === tracked) this.current = undefined;
    });
    this.current = tracked;
    return tracked;
  }

  private async fetchList(): Promise<void> {
    let error: unknown;
    try {
      const { body } = await this.api.json<{ models: ModelEntry[] }>("/v1/models");
      this.models = body.models;
    } catch (err) {
      this.models = [];
      error = err;
    }
    for (const listener of this.listeners) listener(this.models, error);
  }
}

/**
 * Fills a model picker, keeping the current choice when it is still listed, else the first
 * model that `preferred` picks, else the first. The listing has no kind field: the pickers
 * prefer by name (chat: not a decision model; decisions: a decision model).
 */
export function fillPicker(select: HTMLSelectElement, models: readonly ModelEntry[], preferred: (name: string) => boolean): void {
  const previous = select.value;
  clear(select);
  for (const model of models) select.append(el("option", { text: model.name, attrs: { value: model.name } }));
  const names = models.map((m) => m.name);
  select.value = names.includes(previous) ? previous : (names.find(preferred) ?? names[0] ?? "");
}

export const isDecisionModel = (name: string) => /decision|jev/i.test(name);

/** The Models tab: every listed model with its description and release date. */
export function mountModelsTab(list: ModelList): void {
  const body = document.getElementById("models-body")!;
  const error = document.getElementById("models-error")!;
  document.getElementById("models-reload")!.addEventListener("click", () => void list.load());
  list.onChange((models, err) => {
    clear(body);
    if (err !== undefined) showError(error, err);
    else hideError(error);
    if (models.length === 0 && err === undefined)
      body.append(el("tr", {}, el("td", { attrs: { colspan: "3" }, text: "No model is served right now." })));
    for (const m of models) {
      body.append(
        el(
          "tr",
          {},
          el("td", {}, el("code", { text: m.name })),
          el("td", { text: m.description }),
          el("td", {}, el("time", { text: m.release_date, attrs: { datetime: m.release_date } })),
        ),
      );
    }
  });
}
