import { clear, el, percent } from "../dom.js";

export interface DecisionResponse {
  model: string;
  answers: Record<string, Answer>;
  usage?: { input_tokens: number; output_tokens: number };
}

type Answer =
  | { type: "noul"; noul: number }
  | { type: "choice"; choice: string; probabilities: Record<string, number>; confidence: number }
  | { type: "score"; score: number; legend: Record<string, string>; probabilities: Record<string, number>; confidence: number };

/** One labelled probability bar; the width follows a CSS variable (the page's CSP allows no inline style attributes). */
function bar(label: string, p: number, best: boolean): HTMLElement {
  const fill = el("span", { class: "bar-fill" });
  fill.style.setProperty("--p", String(Math.max(0, Math.min(1, p))));
  return el(
    "div",
    {
      class: best ? "bar-row best" : "bar-row",
      attrs: { role: "meter", "aria-valuemin": "0", "aria-valuemax": "1", "aria-valuenow": String(p), "aria-label": label },
    },
    el("span", { class: "bar-label", text: label, title: label }),
    el("span", { class: "bar" }, fill),
    el("span", { class: "bar-value", text: percent(p) }),
  );
}

function bars(probabilities: Record<string, number>, labelOf: (key: string) => string): HTMLElement {
  const entries = Object.entries(probabilities);
  const top = Math.max(...entries.map(([, p]) => p));
  return el("div", { class: "bars" }, ...entries.map(([key, p]) => bar(labelOf(key), p, p === top)));
}

function answerCard(id: string, answer: Answer): HTMLElement {
  const head = el("h3", {}, el("code", { class: "question-id", text: id }), " ", el("span", { class: "question-type", text: answer.type }));
  const card = el("article", { class: "answer" }, head);
  card.dataset["question"] = id;
  switch (answer.type) {
    case "noul":
      card.append(
        bars({ yes: answer.noul, no: 1 - answer.noul }, (k) => k),
        el("p", { class: "answer-line", text: `P(yes) = ${answer.noul.toFixed(3)} · answer ${answer.noul >= 0.5 ? "yes" : "no"}` }),
      );
      break;
    case "choice":
      card.append(
        bars(answer.probabilities, (k) => k),
        el("p", { class: "answer-line", text: `answer ${answer.choice} · confidence ${answer.confidence.toFixed(3)}` }),
      );
      break;
    case "score": {
      const levels = Object.keys(answer.legend).length;
      card.append(
        bars(answer.probabilities, (k) => `${k} · ${answer.legend[k] ?? ""}`),
        el("p", {
          class: "answer-line",
          text: `expected score ${answer.score.toFixed(2)} (0–${levels - 1}) · confidence ${answer.confidence.toFixed(3)}`,
        }),
      );
      break;
    }
    default:
      card.append(el("pre", { text: JSON.stringify(answer, null, 2) }));
  }
  return card;
}

/** The decision's answers: a card per question with its bars, then the model, usage and request id. */
export function showDecision(root: HTMLElement, response: DecisionResponse, requestId: string): void {
  clear(root);
  const facts = [`model ${response.model}`];
  if (response.usage !== undefined) facts.push(`${response.usage.input_tokens} input tokens`);
  facts.push(`x-service-request-id ${requestId || "(none)"}`);
  root.append(el("p", { class: "decision-meta", testid: "decision-meta", text: facts.join(" · ") }));
  for (const [id, answer] of Object.entries(response.answers)) root.append(answerCard(id, answer));
}
