import { randomBytes } from "node:crypto";
import { FinishReason, type GenerateDelta, type GenerateResponse } from "../../gen/tessera/inference/v1/inference_pb.js";
import type {
  FunctionCallItem,
  MessageItem,
  OutputItem,
  ReasoningItem,
  ResponseObject,
  ResponseStatus,
  ResponseStreamEvent,
  ResponsesUsage,
} from "../schemas/responses-response.js";
import { IncompleteGeneration } from "./chat.js";
import type { ResponseEcho } from "./responses-request.js";

/**
 * Inference Generate events → OpenAI's `response` object and the events of its stream. One
 * builder serves both: a stream sends every event it returns, a JSON answer keeps only the
 * final object, so the two always agree. Output items, in the order the model wrote them: a
 * `reasoning` item (the thinking, as one summary_text part), a `message` item (one
 * output_text part), one `function_call` item per tool call.
 */

export type { ResponseObject, ResponseStreamEvent } from "../schemas/responses-response.js";

const newId = (prefix: string): string => `${prefix}_${randomBytes(24).toString("hex")}`;

export interface ResponseMeta {
  id: string;
  /** Unix seconds. */
  createdAt: number;
  /** The model id to show until the Started event names the one that answers. */
  model: string;
  echo: ResponseEcho;
}

export function createResponseMeta(init: { model: string; echo: ResponseEcho; id?: string; createdAt?: number }): ResponseMeta {
  return {
    id: init.id ?? newId("resp"),
    createdAt: init.createdAt ?? Math.floor(Date.now() / 1000),
    model: init.model,
    echo: init.echo,
  };
}

/** An event before its `sequence_number` is given. */
type Unnumbered<E> = E extends unknown ? Omit<E, "sequence_number"> : never;
type Pending = Unnumbered<ResponseStreamEvent>;

type OpenItem =
  | { kind: "reasoning"; index: number; item: ReasoningItem }
  | { kind: "message"; index: number; item: MessageItem }
  | { kind: "function_call"; index: number; item: FunctionCallItem; call: number };

export interface ResponseBuilder {
  /** The events one generation event gives (the first one also opens the response). */
  fromEvent(event: GenerateResponse): ResponseStreamEvent[];
  /** After Finished: the terminal event (`response.completed` or `response.incomplete`) with the usage. */
  finish(reasoningTokens: number): ResponseStreamEvent;
  /** When the generation failed after the stream opened: an `error` event, then `response.failed`. */
  fail(error: { message: string; type: string; code: string | null }): ResponseStreamEvent[];
  /** The response as it stands. */
  readonly response: ResponseObject;
  /** The thinking text so far (its tokens are `reasoning_tokens`). */
  readonly reasoning: string;
  /** Prompt tokens (from Started) and completion tokens (from Finished) seen so far. */
  readonly usage: { promptTokens: number; completionTokens: number | undefined };
  readonly finished: boolean;
}

export function createResponseBuilder(meta: ResponseMeta): ResponseBuilder {
  let sequence = 0;
  let status: ResponseStatus = "in_progress";
  let model = meta.model;
  let opened = false;
  let finished = false;
  let incomplete = false;
  let reasoning = "";
  let failure: ResponseObject["error"] = null;
  let totals: ResponsesUsage | null = null;
  const usage: { promptTokens: number; completionTokens: number | undefined } = { promptTokens: 0, completionTokens: undefined };
  const output: OutputItem[] = [];
  let open: OpenItem | undefined;

  const snapshot = (): ResponseObject => ({
    id: meta.id,
    object: "response",
    created_at: meta.createdAt,
    status,
    error: failure,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    instructions: meta.echo.instructions,
    max_output_tokens: meta.echo.maxOutputTokens,
    model,
    output: structuredClone(output),
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: meta.echo.effort, summary: null },
    store: false,
    background: false,
    temperature: null,
    top_p: null,
    text: { format: meta.echo.format },
    tool_choice: meta.echo.toolChoice,
    tools: meta.echo.tools,
    truncation: "disabled",
    metadata: meta.echo.metadata,
    usage: totals,
  });
  const numbered = (events: Pending[]): ResponseStreamEvent[] =>
    events.map((event) => ({ ...event, sequence_number: sequence++ }) as ResponseStreamEvent);

  const opening = (): Pending[] => {
    if (opened) return [];
    opened = true;
    return [
      { type: "response.created", response: snapshot() },
      { type: "response.in_progress", response: snapshot() },
    ];
  };

  /** Closes the open item: its `done` events; `cut` marks it incomplete (max_output_tokens). */
  const close = (cut = false): Pending[] => {
    const current = open;
    if (current === undefined) return [];
    open = undefined;
    current.item.status = cut ? "incomplete" : "completed";
    const { index } = current;
    const at = { item_id: current.item.id, output_index: index };
    const done = { type: "response.output_item.done" as const, output_index: index, item: structuredClone(current.item) };
    switch (current.kind) {
      case "reasoning": {
        const part = current.item.summary[0]!;
        return [
          { type: "response.reasoning_summary_text.done", ...at, summary_index: 0, text: part.text },
          { type: "response.reasoning_summary_part.done", ...at, summary_index: 0, part: { ...part } },
          done,
        ];
      }
      case "message": {
        const part = current.item.content[0]!;
        return [
          { type: "response.output_text.done", ...at, content_index: 0, text: part.text, logprobs: [] },
          { type: "response.content_part.done", ...at, content_index: 0, part: { ...part } },
          done,
        ];
      }
      case "function_call":
        return [{ type: "response.function_call_arguments.done", ...at, name: current.item.name, arguments: current.item.arguments }, done];
    }
  };

  const openItem = (next: OpenItem, added: Pending[]): Pending[] => {
    output.push(next.item);
    open = next;
    return [{ type: "response.output_item.added", output_index: next.index, item: structuredClone(next.item) }, ...added];
  };

  const thinkingPiece = (text: string): Pending[] => {
    const events: Pending[] = [];
    if (open?.kind !== "reasoning") {
      events.push(...close());
      const item: ReasoningItem = { type: "reasoning", id: newId("rs"), summary: [], status: "in_progress" };
      const index = output.length;
      events.push(
        ...openItem({ kind: "reasoning", index, item }, [
          {
            type: "response.reasoning_summary_part.added",
            item_id: item.id,
            output_index: index,
            summary_index: 0,
            part: { type: "summary_text", text: "" },
          },
        ]),
      );
      item.summary.push({ type: "summary_text", text: "" });
    }
    const current = open as Extract<OpenItem, { kind: "reasoning" }>;
    current.item.summary[0]!.text += text;
    reasoning += text;
    const at = { item_id: current.item.id, output_index: current.index };
    return [...events, { type: "response.reasoning_summary_text.delta", ...at, summary_index: 0, delta: text }];
  };

  const textPiece = (text: string): Pending[] => {
    const events: Pending[] = [];
    if (open?.kind !== "message") {
      events.push(...close());
      const item: MessageItem = { type: "message", id: newId("msg"), role: "assistant", status: "in_progress", content: [] };
      const index = output.length;
      const part = { type: "output_text" as const, text: "", annotations: [] };
      events.push(
        ...openItem({ kind: "message", index, item }, [
          {
            type: "response.content_part.added",
            item_id: item.id,
            output_index: index,
            content_index: 0,
            part: { ...part, annotations: [] },
          },
        ]),
      );
      item.content.push(part);
    }
    const current = open as Extract<OpenItem, { kind: "message" }>;
    current.item.content[0]!.text += text;
    const at = { item_id: current.item.id, output_index: current.index };
    return text === "" ? events : [...events, { type: "response.output_text.delta", ...at, content_index: 0, delta: text, logprobs: [] }];
  };

  const callPiece = (piece: GenerateDelta["toolCalls"][number]): Pending[] => {
    const events: Pending[] = [];
    if (open?.kind !== "function_call" || open.call !== piece.index) {
      events.push(...close());
      const item: FunctionCallItem = {
        type: "function_call",
        id: newId("fc"),
        call_id: piece.id || newId("call"),
        name: piece.name,
        arguments: "",
        status: "in_progress",
      };
      events.push(...openItem({ kind: "function_call", index: output.length, item, call: piece.index }, []));
    }
    const current = open as Extract<OpenItem, { kind: "function_call" }>;
    if (piece.arguments === "") return events;
    current.item.arguments += piece.arguments;
    const at = { item_id: current.item.id, output_index: current.index };
    return [...events, { type: "response.function_call_arguments.delta", ...at, delta: piece.arguments }];
  };

  return {
    get response() {
      return snapshot();
    },
    get reasoning() {
      return reasoning;
    },
    get usage() {
      return usage;
    },
    get finished() {
      return finished;
    },
    fromEvent({ event }) {
      const events: Pending[] = [];
      switch (event.case) {
        case "started":
          model = event.value.model || model;
          usage.promptTokens = event.value.promptTokens;
          events.push(...opening());
          break;
        case "delta":
          events.push(...opening());
          if (event.value.reasoning !== "") events.push(...thinkingPiece(event.value.reasoning));
          if (event.value.content !== "") events.push(...textPiece(event.value.content));
          for (const piece of event.value.toolCalls) events.push(...callPiece(piece));
          break;
        case "finished": {
          events.push(...opening());
          finished = true;
          incomplete = event.value.finishReason === FinishReason.LENGTH;
          // A reply with nothing in it is still a message, with empty text.
          if (output.length === 0) events.push(...textPiece(""));
          events.push(...close(incomplete));
          usage.promptTokens = event.value.usage?.promptTokens || usage.promptTokens;
          usage.completionTokens = event.value.usage?.completionTokens ?? 0;
          break;
        }
        default:
          break;
      }
      return numbered(events);
    },
    finish(reasoningTokens) {
      if (!finished) throw new IncompleteGeneration();
      const input = usage.promptTokens;
      const outputTokens = usage.completionTokens ?? 0;
      totals = {
        input_tokens: input,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: outputTokens,
        output_tokens_details: { reasoning_tokens: Math.min(reasoningTokens, outputTokens) },
        total_tokens: input + outputTokens,
      };
      status = incomplete ? "incomplete" : "completed";
      return numbered([{ type: incomplete ? "response.incomplete" : "response.completed", response: snapshot() }])[0]!;
    },
    fail(error) {
      const events: Pending[] = [...opening(), ...close(true)];
      status = "failed";
      failure = { code: error.code ?? error.type, message: error.message };
      events.push(
        {
          type: "error",
          code: error.code,
          message: error.message,
          param: null,
          // The same error nested, as the chat stream sends it: the openai SDK throws it to its caller.
          error: { type: error.type, code: error.code, message: error.message, param: null },
        },
        { type: "response.failed", response: snapshot() },
      );
      return numbered(events);
    },
  };
}

/**
 * Collects a Generate stream into the response object; `countTokens` gives the tokens of the
 * thinking text (`output_tokens_details.reasoning_tokens`).
 */
export async function collectResponse(
  events: AsyncIterable<GenerateResponse>,
  meta: ResponseMeta,
  countTokens: (text: string) => Promise<number>,
): Promise<ResponseObject> {
  const builder = createResponseBuilder(meta);
  for await (const event of events) builder.fromEvent(event);
  if (!builder.finished) throw new IncompleteGeneration();
  builder.finish(await countTokens(builder.reasoning));
  return builder.response;
}
