import type { Api } from "../api.js";
import { byId, clear, el } from "../dom.js";
import { hideError, showError } from "../error-view.js";
import { fillPicker, isDecisionModel, type ModelList } from "../models.js";
import { type DecisionResponse, showDecision } from "./result-view.js";
import { DEFAULT_STATE, TEMPLATES, type TemplateName, addTemplate } from "./templates.js";

/** The Decisions tab: state and questions editors, templates, run, and the answers as bars. */
export function mountDecisionsTab(api: Api, models: ModelList): void {
  const model = byId<HTMLSelectElement>("decision-model");
  const state = byId<HTMLTextAreaElement>("decision-state");
  const questions = byId<HTMLTextAreaElement>("decision-questions");
  const run = byId<HTMLButtonElement>("decision-run");
  const result = byId("decision-result");
  const errorBox = byId("decision-error");

  state.value = DEFAULT_STATE;
  questions.value = addTemplate("", "noul");
  models.onChange((list) => fillPicker(model, list, (name) => isDecisionModel(name) && /latest/.test(name)));

  for (const button of document.querySelectorAll<HTMLButtonElement>("[data-template]")) {
    const name = button.dataset["template"] as TemplateName;
    if (!(name in TEMPLATES)) continue;
    button.addEventListener("click", () => {
      try {
        questions.value = addTemplate(questions.value, name);
        hideError(errorBox);
      } catch (err) {
        showError(errorBox, err);
      }
    });
  }

  const stateValue = (): unknown => {
    const kind = document.querySelector<HTMLInputElement>('input[name="state-kind"]:checked')?.value;
    if (kind !== "json") return state.value;
    try {
      return JSON.parse(state.value);
    } catch (err) {
      throw new Error(`The state is not valid JSON: ${(err as Error).message}`);
    }
  };

  async function runDecision(): Promise<void> {
    if (model.value === "" && models.pending) {
      run.disabled = true;
      await models.settled();
      run.disabled = false;
    }
    let body: Record<string, unknown>;
    try {
      let parsed: unknown;
      try {
        parsed = JSON.parse(questions.value);
      } catch (err) {
        throw new Error(`The questions are not valid JSON: ${(err as Error).message}`);
      }
      body = { model: model.value, state: stateValue(), questions: parsed };
    } catch (err) {
      showError(errorBox, err);
      return;
    }
    hideError(errorBox);
    run.disabled = true;
    result.dataset["loading"] = "true";
    try {
      const { body: response, requestId } = await api.json<DecisionResponse>("/v1/systemone", { method: "POST", body });
      showDecision(result, response, requestId);
    } catch (err) {
      clear(result);
      result.append(el("p", { class: "hint", text: "No answers: the request failed." }));
      showError(errorBox, err);
    } finally {
      run.disabled = false;
      delete result.dataset["loading"];
    }
  }

  run.addEventListener("click", () => void runDecision());
  for (const field of [state, questions]) {
    field.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        void runDecision();
      }
    });
  }
}
