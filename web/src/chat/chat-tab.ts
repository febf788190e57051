import type { Api } from "../api.js";
import { byId } from "../dom.js";
import { hideError, showError } from "../error-view.js";
import { fillPicker, isDecisionModel, type ModelList } from "../models.js";
import { type ChatMessage, type ChatSettings, chatRequestBody, unansweredToolCalls } from "./chat-request.js";
import { readChatStream } from "./chat-stream.js";
import { ConversationView } from "./conversation-view.js";
import { DenoiseView } from "./denoise-view.js";
import { ToolsEditor } from "./tools-editor.js";

/**
 * The Chat tab: settings, conversation, composer and the live denoising view. One request at
 * a time; Stop (or Esc) aborts it, which closes the connection and frees its slot.
 */
export function mountChatTab(api: Api, models: ModelList): void {
  const model = byId<HTMLSelectElement>("chat-model");
  const system = byId<HTMLTextAreaElement>("chat-system");
  const maxTokens = byId<HTMLInputElement>("chat-max-tokens");
  const thinking = byId<HTMLInputElement>("chat-thinking");
  const jsonMode = byId<HTMLSelectElement>("chat-json-mode");
  const schema = byId<HTMLTextAreaElement>("chat-schema");
  const toolChoice = byId<HTMLSelectElement>("chat-tool-choice");
  const tools = new ToolsEditor(byId("chat-tools"), byId<HTMLButtonElement>("chat-add-tool"));
  const form = byId<HTMLFormElement>("chat-form");
  const input = byId<HTMLTextAreaElement>("chat-input");
  const inputLabel = byId("chat-input-label");
  const send = byId<HTMLButtonElement>("chat-send");
  const stop = byId<HTMLButtonElement>("chat-stop");
  const errorBox = byId("chat-error");
  const conversation = new ConversationView(byId<HTMLOListElement>("chat-log"));
  const denoise = new DenoiseView(byId("denoise"));

  const history: ChatMessage[] = [];
  let running: AbortController | null = null;

  // Set while the error box says there is no model, so a list that then arrives clears it.
  let noModelShown = false;
  let waitingForModels = false;
  models.onChange((list) => {
    fillPicker(model, list, (name) => !isDecisionModel(name));
    if (noModelShown && model.value !== "") {
      hideError(errorBox);
      noModelShown = false;
    }
  });
  jsonMode.addEventListener("change", () => {
    schema.hidden = jsonMode.value !== "json_schema";
  });

  const settings = (): ChatSettings => ({
    model: model.value,
    system: system.value,
    maxTokens: maxTokens.value,
    thinking: thinking.checked,
    jsonMode: jsonMode.value as ChatSettings["jsonMode"],
    schema: schema.value,
    tools: tools.tools,
    toolChoice: toolChoice.value as ChatSettings["toolChoice"],
  });

  const setBusy = (busy: boolean) => {
    send.disabled = busy;
    stop.disabled = !busy;
    form.dataset["busy"] = String(busy);
  };

  /** The composer answers the first open tool call, when there is one. */
  const updateComposer = () => {
    const open = unansweredToolCalls(history)[0];
    inputLabel.textContent = open === undefined ? "Message" : `Result of ${open.function.name}`;
    inputLabel.classList.toggle("visually-hidden", open === undefined);
    input.placeholder =
      open === undefined
        ? "Message (Enter sends, Shift+Enter for a new line, Esc stops)"
        : `What ${open.function.name} returned (sent as its tool result)`;
  };

  async function sendMessage(): Promise<void> {
    if (running !== null || waitingForModels || input.value.trim() === "") return;
    if (model.value === "" && models.pending) {
      // A key pasted and Send pressed at once: the list is still on its way.
      waitingForModels = true;
      send.disabled = true;
      send.textContent = "Loading models…";
      await models.settled();
      send.textContent = "Send";
      send.disabled = false;
      waitingForModels = false;
    }
    if (model.value === "") {
      showError(errorBox, new Error("No model to talk to: paste an API key first (the model list is loaded with it)."));
      noModelShown = true;
      return;
    }
    noModelShown = false;
    const open = unansweredToolCalls(history)[0];
    const message: ChatMessage =
      open === undefined ? { role: "user", content: input.value } : { role: "tool", content: input.value, tool_call_id: open.id };
    let body: Record<string, unknown>;
    try {
      body = chatRequestBody(settings(), [...history, message]);
    } catch (err) {
      showError(errorBox, err);
      return;
    }
    hideError(errorBox);
    history.push(message);
    if (open === undefined) conversation.addUser(input.value);
    else conversation.addToolResult(open, input.value);
    input.value = "";

    const controller = new AbortController();
    running = controller;
    setBusy(true);
    denoise.reset();
    const reply = conversation.startReply();
    const started = performance.now();
    let forwards = 0;
    let requestId = "";
    try {
      const res = await api.request("/v1/chat/completions", { method: "POST", body, signal: controller.signal });
      requestId = res.headers.get("x-service-request-id") ?? "";
      const final = await readChatStream(res.body!, {
        onStep: (step) => {
          forwards++;
          denoise.step(step);
        },
        onReply: (state) => reply.update(state),
      });
      history.push({
        role: "assistant",
        content: final.content === "" && final.toolCalls.length > 0 ? null : final.content,
        ...(final.toolCalls.length > 0 ? { tool_calls: final.toolCalls } : {}),
      });
      const tokens = final.usage?.completion_tokens;
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      reply.finish(
        [
          final.finishReason ?? "ended",
          tokens !== undefined ? `${tokens} tokens` : "",
          `${forwards} forwards`,
          `${seconds} s`,
          requestId ? `x-service-request-id ${requestId}` : "",
        ]
          .filter((part) => part !== "")
          .join(" · "),
      );
      denoise.finish(`Done: ${tokens ?? "?"} reply tokens in ${forwards} denoising forwards.`);
    } catch (err) {
      if (controller.signal.aborted) {
        reply.finish("stopped", true);
        denoise.finish("Stopped: the request was aborted and its slot freed.");
      } else {
        reply.finish("failed");
        denoise.finish("The request failed.");
        showError(errorBox, err);
      }
    } finally {
      running = null;
      setBusy(false);
      updateComposer();
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void sendMessage();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      void sendMessage();
    }
  });
  stop.addEventListener("click", () => running?.abort());
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && running !== null) {
      event.preventDefault();
      running.abort();
    }
  });
  byId("chat-clear").addEventListener("click", () => {
    running?.abort();
    history.length = 0;
    conversation.clear();
    denoise.reset();
    hideError(errorBox);
    updateComposer();
  });
}
