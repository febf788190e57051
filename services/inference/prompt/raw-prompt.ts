import { create } from "@bufbuild/protobuf";
import {
  type GenerateRequest,
  type PromptToken,
  PromptTokenSchema,
  ResponseFormatType,
} from "../../../gen/tessera/inference/v1/inference_pb.js";
import { InvalidRequest } from "../core/engine-errors.js";
import type { TextTokenizer } from "./tokenizer.js";

/**
 * A Generate request with `raw_prompt` (the legacy completions): the prompt is the text itself,
 * so nothing that needs the chat template may come with it. Refused with InvalidArgument.
 */
export function checkRawPromptRequest(req: Pick<GenerateRequest, "messages" | "tools" | "options">, raw: string): void {
  const invalid = (message: string) => new InvalidRequest(`raw_prompt: ${message}`);
  if (raw === "") throw invalid("must not be empty");
  if (req.messages.length > 0 || req.tools.length > 0) throw invalid("comes instead of messages and tools, not with them");
  const options = req.options;
  const format = options?.responseFormat?.type ?? ResponseFormatType.UNSPECIFIED;
  if (format !== ResponseFormatType.UNSPECIFIED && format !== ResponseFormatType.TEXT) {
    throw invalid("response_format needs a chat template; a raw prompt's reply is plain text");
  }
  if (options?.toolChoice !== undefined) throw invalid("tool_choice needs a chat template and tools");
  if (options?.enableThinking === true) throw invalid("enable_thinking needs a chat template");
}

/** The prompt's tokens as GenerateStarted.tokenized_prompt lists them: text and exact bytes. */
export function tokenizedPrompt(tokenizer: TextTokenizer, ids: readonly number[]): PromptToken[] {
  return ids.map((id) =>
    create(PromptTokenSchema, {
      token: tokenizer.decode([id]),
      bytes: tokenizer.tokenBytes?.(id) ?? new TextEncoder().encode(tokenizer.decode([id])),
    }),
  );
}
