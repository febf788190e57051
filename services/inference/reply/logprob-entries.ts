import { create } from "@bufbuild/protobuf";
import { type TokenLogprob, TokenLogprobSchema } from "../../../gen/tessera/inference/v1/inference_pb.js";
import type { CommittedLogprob } from "../decoder/logprobs.js";
import type { TextTokenizer } from "../prompt/tokenizer.js";

/** The decoder's logprob entries as GenerateDelta.logprobs: each token with its text and exact bytes. */
export function tokenLogprobs(tokenizer: TextTokenizer, committed: readonly CommittedLogprob[] | undefined): TokenLogprob[] {
  if (committed === undefined || committed.length === 0) return [];
  const bytesOf = (id: number) => tokenizer.tokenBytes?.(id) ?? new TextEncoder().encode(tokenizer.decode([id]));
  return committed.map((entry) =>
    create(TokenLogprobSchema, {
      token: tokenizer.decode([entry.token]),
      logprob: entry.logprob,
      bytes: bytesOf(entry.token),
      step: entry.step,
      topLogprobs: entry.top.map((alt) => ({ token: tokenizer.decode([alt.token]), logprob: alt.logprob, bytes: bytesOf(alt.token) })),
    }),
  );
}
