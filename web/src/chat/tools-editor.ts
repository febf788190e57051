import { el } from "../dom.js";
import type { ToolDraft } from "./chat-request.js";

const EXAMPLE_PARAMETERS = JSON.stringify({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }, null, 2);

/** The tools editor: one row per function tool (name, description, JSON schema of its arguments). */
export class ToolsEditor {
  private readonly rows: { root: HTMLElement; name: HTMLInputElement; description: HTMLInputElement; parameters: HTMLTextAreaElement }[] =
    [];

  constructor(
    private readonly container: HTMLElement,
    addButton: HTMLButtonElement,
  ) {
    addButton.addEventListener("click", () => this.add());
  }

  add(init: Partial<ToolDraft> = {}): void {
    const n = this.rows.length + 1;
    const name = el("input", { attrs: { type: "text", placeholder: "get_weather", "aria-label": `tool ${n} name`, spellcheck: "false" } });
    name.value = init.name ?? (this.rows.length === 0 ? "get_weather" : "");
    const description = el("input", { attrs: { type: "text", placeholder: "what it does", "aria-label": `tool ${n} description` } });
    description.value = init.description ?? "";
    const parameters = el("textarea", { attrs: { rows: "4", spellcheck: "false", "aria-label": `tool ${n} parameters (JSON schema)` } });
    parameters.value = init.parameters ?? EXAMPLE_PARAMETERS;
    const remove = el("button", { class: "secondary small", text: "Remove", attrs: { type: "button" } });
    const root = el("div", { class: "tool" }, name, description, parameters, remove);
    const row = { root, name, description, parameters };
    remove.addEventListener("click", () => {
      this.rows.splice(this.rows.indexOf(row), 1);
      root.remove();
    });
    this.rows.push(row);
    this.container.append(root);
  }

  get tools(): ToolDraft[] {
    return this.rows.map((r) => ({ name: r.name.value, description: r.description.value, parameters: r.parameters.value }));
  }
}
