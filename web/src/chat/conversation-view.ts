import { el } from "../dom.js";
import type { ReplyState } from "./chat-stream.js";
import type { ToolCall } from "./chat-request.js";

/**
 * The conversation as text. Only the reply being written (or the last one) carries
 * data-testid="chat-reply", with data-done="true" once it has finished.
 */
export class ConversationView {
  constructor(private readonly log: HTMLOListElement) {}

  clear(): void {
    this.log.replaceChildren();
  }

  addUser(text: string): void {
    this.log.append(el("li", { class: "message user" }, el("div", { class: "role", text: "you" }), el("div", { class: "text", text })));
    this.scroll();
  }

  addToolResult(call: ToolCall, text: string): void {
    this.log.append(
      el(
        "li",
        { class: "message tool" },
        el("div", { class: "role", text: `result of ${call.function.name}` }),
        el("div", { class: "text", text }),
      ),
    );
    this.scroll();
  }

  /** A new assistant reply, written as the stream arrives. */
  startReply(): ReplyView {
    for (const old of this.log.querySelectorAll('[data-testid="chat-reply"]')) old.removeAttribute("data-testid");
    const view = new ReplyView();
    this.log.append(view.root);
    this.scroll();
    return view;
  }

  scroll(): void {
    this.log.lastElementChild?.scrollIntoView({ block: "nearest" });
  }
}

export class ReplyView {
  readonly root: HTMLLIElement;
  private readonly reasoning: HTMLDetailsElement;
  private readonly reasoningText: HTMLElement;
  private readonly content: HTMLElement;
  private readonly calls: HTMLElement;
  private readonly meta: HTMLElement;

  constructor() {
    this.reasoningText = el("div", { class: "text reasoning-text" });
    this.reasoning = el("details", { class: "reasoning", attrs: { open: "" } }, el("summary", { text: "thinking" }), this.reasoningText);
    this.reasoning.hidden = true;
    this.content = el("div", { class: "text", testid: "chat-reply" });
    this.content.dataset["done"] = "false";
    this.calls = el("div", { class: "tool-calls" });
    this.meta = el("div", { class: "meta", text: "denoising…" });
    this.root = el(
      "li",
      { class: "message assistant" },
      el("div", { class: "role", text: "assistant" }),
      this.reasoning,
      this.content,
      this.calls,
      this.meta,
    );
  }

  update(reply: ReplyState): void {
    this.reasoning.hidden = reply.reasoning === "";
    this.reasoningText.textContent = reply.reasoning;
    this.content.textContent = reply.content;
    this.calls.replaceChildren(
      ...reply.toolCalls.map((call) =>
        el(
          "div",
          { class: "tool-call" },
          el("span", { class: "tool-call-label", text: "tool call " }),
          el("code", { text: `${call.function.name}(${call.function.arguments})` }),
        ),
      ),
    );
  }

  finish(meta: string, stopped = false): void {
    this.content.dataset["done"] = "true";
    if (stopped) this.content.dataset["stopped"] = "true";
    this.reasoning.open = false;
    this.meta.textContent = meta;
  }
}
