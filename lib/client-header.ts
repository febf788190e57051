/**
 * Whose request a decision is, for sharing the model by client (services/inference/score/
 * decision-share.ts): the gateway sets it to the caller's account id, on the JSON route and on
 * every Connect call of the public port (over whatever the caller sent); the decision service
 * passes it on to Score.
 */
export const CLIENT_HEADER = "x-tessera-client";

/** The header to pass on, as call options' `headers` (none when the call had none). */
export function clientHeaders(from: Headers): Record<string, string> {
  const client = from.get(CLIENT_HEADER);
  return client === null ? {} : { [CLIENT_HEADER]: client };
}
